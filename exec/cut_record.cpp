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
                                   const CutPlan* resumed_at)
    : first_step(config.first_step) {
  const auto every = static_cast<std::size_t>(config.cut_every);
  for (std::int32_t j = resumed_at ? resumed_at->updates + 1 : 1; j < schedule.steps; ++j) {
    if ((config.first_step + static_cast<std::size_t>(j)) % every != 0) continue;
    CutPlan plan = plan_cut(schedule, j);
    // Every device must reach the cut from where it starts (cuts move forward with the update
    // they follow; this keeps a device from waiting at a cut it has passed).
    if (resumed_at)
      for (std::size_t d = 0; d < plan.positions.size(); ++d)
        if (plan.positions[d] < resumed_at->positions[d])
          throw std::logic_error(
              fmt::format("cut {} lies before cut {} on device {}", j, resumed_at->updates, d));
    plans.push_back(std::move(plan));
  }
  const std::size_t width = config.batch * config.seq_len * config.config.d_model;
  for (const CutPlan& plan : plans)
    messages.emplace_back(plan.messages.size(), std::vector<float>(width));
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

void Executor::CutRecorder::reset() {
  captured_.assign(plans.size(), 0);
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

void Executor::CutRecorder::keep_message(std::size_t from, std::int32_t src, std::int64_t position,
                                         std::int32_t dst, const MessageKey& key,
                                         std::span<const float> data) {
  for (std::size_t j = from; j < plans.size(); ++j) {
    const auto& crossing = plans[j].messages;
    for (std::size_t i = 0; i < crossing.size(); ++i)
      if (crossing[i].src == src && crossing[i].sent_at == position && crossing[i].dst == dst &&
          crossing[i].key == key)
        std::copy(data.begin(), data.end(), messages[j][i].begin());
  }
}

void Executor::CutRecorder::captured(std::size_t j, const ExecConfig& config) {
  {
    std::lock_guard lock(mutex_);
    if (++captured_[j] < devices) return;
  }
  // Every device has captured cut j and none touches the image until written_ passes j.
  std::swap(image.plan, plans[j]);
  std::swap(image.messages, messages[j]);
  struct SwapBack {
    CutRecorder& r;
    std::size_t j;
    ~SwapBack() {
      std::swap(r.image.plan, r.plans[j]);
      std::swap(r.image.messages, r.messages[j]);
    }
  } swap_back{*this, j};
  config.on_cut(image, first_step + static_cast<std::size_t>(image.plan.updates));
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
    StageRuntime& rt = *stages_[s];
    const model::StageState& saved = image.stages[s];
    if (saved.range != rt.layout().range() || saved.weights.size() != rt.layout().size() ||
        saved.first_moment.size() != rt.layout().size() ||
        saved.second_moment.size() != rt.layout().size())
      throw InputError(fmt::format(
          "stage {} of the cut holds layers {}..{}, this run's holds {}..{} (another partition)", s,
          saved.range.first_layer, saved.range.first_layer + saved.range.num_layers,
          rt.layout().range().first_layer,
          rt.layout().range().first_layer + rt.layout().range().num_layers));
    std::copy(saved.weights.begin(), saved.weights.end(), rt.params().begin());
    std::copy(saved.first_moment.begin(), saved.first_moment.end(),
              rt.optimizer().first_moment().begin());
    std::copy(saved.second_moment.begin(), saved.second_moment.end(),
              rt.optimizer().second_moment().begin());
    rt.optimizer().set_steps(saved.optimizer_steps);
    rt.load_image(image.runtime[s], fmt::format("stage {} of the cut", s));
  }
}

}  // namespace paci::exec
