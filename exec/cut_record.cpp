// The executor's cuts: planning them before a run with their buffers, the hand-over between the
// devices capturing one, and restoring a resumed run's stages from an image.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "exec/cut_recorder.hpp"
#include "exec/stage_runtime.hpp"

namespace paci::exec {

Executor::CutRecorder::CutRecorder(const Schedule& schedule, const ExecConfig& config,
                                   const std::vector<std::unique_ptr<StageRuntime>>& stages,
                                   const CutImage* resumed)
    : first_step(config.first_step),
      planner_(schedule),
      width_(config.batch * config.seq_len * config.config.d_model),
      resumed_(resumed) {
  const auto every = static_cast<std::size_t>(config.cut_every);
  for (std::int32_t j = resumed ? resumed->plan.updates + 1 : 1; j < schedule.steps; ++j)
    if ((config.first_step + static_cast<std::size_t>(j)) % every == 0) updates_.push_back(j);
  devices = static_cast<std::size_t>(schedule.num_devices());
  for (const auto& rt : stages) {
    const std::size_t n = rt->layout().size();
    image.stages.push_back({rt->layout().range(), 0, std::vector<float>(n), std::vector<float>(n),
                            std::vector<float>(n)});
    image.runtime.emplace_back(rt->image_bytes());
  }
  image.losses.assign(static_cast<std::size_t>(schedule.total_microbatches()), 0.0f);
  reset();
}

void Executor::CutRecorder::plan_into(std::size_t j) {
  if (j >= count()) return;
  Slot& slot = slots_[j % 2];
  slot.plan = planner_.plan(updates_[j]);
  slot.messages.resize(slot.plan.messages.size());
  for (auto& m : slot.messages) m.resize(width_);
}

void Executor::CutRecorder::carry(const CutPlan& from, const std::vector<std::vector<float>>& data,
                                  std::size_t j) {
  if (j >= count()) return;
  Slot& to = slots_[j % 2];
  for (std::size_t i = 0; i < from.messages.size(); ++i) {
    const auto it = std::find(to.plan.messages.begin(), to.plan.messages.end(), from.messages[i]);
    if (it != to.plan.messages.end())
      std::ranges::copy(
          data[i], to.messages[static_cast<std::size_t>(it - to.plan.messages.begin())].begin());
  }
}

void Executor::CutRecorder::reset() {
  plan_into(0);
  plan_into(1);
  // Every device starts at or before its position of the first cut (positions never move back).
  if (resumed_) {
    for (std::size_t d = 0; count() > 0 && d < devices; ++d)
      if (position(0, static_cast<std::int32_t>(d)) < resumed_->plan.positions[d])
        throw std::logic_error(fmt::format("cut after update {} lies before cut after update {}",
                                           updates_[0], resumed_->plan.updates));
    carry(resumed_->plan, resumed_->messages, 0);  // in transit across both
  }
  captured_.assign(count(), 0);
  written_ = 0;
}

bool Executor::CutRecorder::may_capture(std::size_t j, bool blocking,
                                        const std::atomic<bool>& aborted) {
  std::unique_lock lock(mutex_);
  while (blocking && written_ < j) {
    if (aborted) throw Aborted();
    written_changed_.wait_for(lock, std::chrono::milliseconds(20));
  }
  return written_ >= j;
}

void Executor::CutRecorder::keep_message(std::size_t j, std::int32_t src, std::int64_t position,
                                         std::int32_t dst, const MessageKey& key,
                                         std::span<const float> data) {
  if (j >= count()) return;
  Slot& slot = slots_[j % 2];
  const CutMessage sent{key, src, dst, position};
  const auto it = std::find(slot.plan.messages.begin(), slot.plan.messages.end(), sent);
  if (it != slot.plan.messages.end())
    std::ranges::copy(
        data, slot.messages[static_cast<std::size_t>(it - slot.plan.messages.begin())].begin());
}

void Executor::CutRecorder::captured(std::size_t j, const ExecConfig& config) {
  {
    std::lock_guard lock(mutex_);
    if (++captured_[j] < devices) return;
  }
  // Every device has taken cut j; none touches the image or cut j's slot until written_ passes
  // j, and only this thread plans.
  Slot& slot = slots_[j % 2];
  std::swap(image.plan, slot.plan);
  std::swap(image.messages, slot.messages);
  {
    struct SwapBack {
      CutImage& image;
      Slot& slot;
      ~SwapBack() {
        std::swap(image.plan, slot.plan);
        std::swap(image.messages, slot.messages);
      }
    } swap_back{image, slot};
    config.on_cut(image, first_step + static_cast<std::size_t>(image.plan.updates));
  }
  carry(slot.plan, slot.messages, j + 1);
  plan_into(j + 2);
  std::lock_guard lock(mutex_);
  written_ = j + 1;
  written_changed_.notify_all();
}

void Executor::restore(const CutImage& image) {
  const CutPlan expected = plan_cut(schedule_, image.plan.updates);
  if (image.plan.positions != expected.positions || image.plan.messages != expected.messages ||
      image.plan.digest != expected.digest)
    throw InputError(
        fmt::format("the cut after update {} was taken in another schedule than this {} (P={}, "
                    "M={}, {} steps): resume with the flags of the run that saved it",
                    image.plan.updates, schedule_.kind, schedule_.stages, schedule_.microbatches,
                    schedule_.steps));
  if (image.stages.size() != stages_.size() || image.runtime.size() != stages_.size() ||
      image.messages.size() != expected.messages.size() ||
      image.losses.size() != static_cast<std::size_t>(schedule_.total_microbatches()))
    throw InputError(fmt::format(
        "the cut holds {} stages, {} messages and {} losses; this run has {}, {} and {}",
        image.stages.size(), image.messages.size(), image.losses.size(), stages_.size(),
        expected.messages.size(), schedule_.total_microbatches()));
  const std::size_t width = config_.batch * config_.seq_len * config_.config.d_model;
  for (const auto& m : image.messages)
    if (m.size() != width)
      throw InputError(
          fmt::format("a message of the cut holds {} floats, this run's hold {}", m.size(), width));
  for (std::size_t s = 0; s < stages_.size(); ++s) {
    StageRuntime& rt = stages_[static_cast<std::int32_t>(s)];
    const model::StageState& saved = image.stages[s];
    if (saved.range != rt.layout().range() || saved.weights.size() != rt.layout().size() ||
        saved.first_moment.size() != rt.layout().size() ||
        saved.second_moment.size() != rt.layout().size())
      throw InputError(fmt::format(
          "stage {} of the cut holds layers {}..{}, this run's holds {}..{} (another partition)", s,
          saved.range.first_layer, saved.range.first_layer + saved.range.num_layers,
          rt.layout().range().first_layer,
          rt.layout().range().first_layer + rt.layout().range().num_layers));
    rt.copy_state_from(saved);
    const std::string what = fmt::format("stage {} of the cut", s);
    rt.load_image(image.runtime[s], what);
    const auto& list = schedule_.devices[static_cast<std::size_t>(schedule_.placement[s])];
    rt.check_image(std::span<const Action>(list).first(static_cast<std::size_t>(
                       image.plan.positions[static_cast<std::size_t>(schedule_.placement[s])])),
                   what);
  }
}

}  // namespace paci::exec
