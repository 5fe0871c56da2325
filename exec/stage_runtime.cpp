// StageRuntime: forward, backward and update of one stage under its weight policy, with the
// versions read and the memory in use recorded as they happen.
#include "exec/stage_runtime.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace paci::exec {

StageRuntime::StageRuntime(const StageRuntimeConfig& config)
    : StageBooks(config, config.activation_capacity),
      stage_(config.shape, config.threads),
      params_(stage_.layout().size(), 0.0f),
      grads_(stage_.layout().size(), 0.0f),
      optimizer_(stage_.layout(), config.adamw, config.threads),
      activations_(config.shape, std::max<std::size_t>(config.activation_capacity, 1)),
      stash_(book_.stash_slots(), std::vector<float>(params_.size(), 0.0f)) {
  snapshots_.assign(config.snapshot_count(), std::vector<float>(params_.size(), 0.0f));
  for (std::size_t i = 0; i < w_book_.size(); ++i) w_stashes_.push_back(stage_.make_weight_stash());
  stage_.set_expert_exchange(config.exchange);
}

void StageRuntime::record_routing(std::int32_t mb, const model::ActivationSlot& slot) {
  if (aux_losses_.empty()) return;
  aux_losses_.at(static_cast<std::size_t>(mb)) = slot.aux_loss();
  const std::size_t E = plan_.shape.config.moe.experts;
  for (std::size_t l = 0; l < plan_.shape.range.num_layers; ++l) {
    const std::span<const std::int32_t> chosen = slot.expert_choices(l);
    for (std::size_t e = 0; e < E; ++e) expert_tokens_[l * E + e] += chosen[e];
  }
}

void StageRuntime::set_params(std::span<const float> host) {
  if (host.size() != params_.size())
    throw std::invalid_argument(fmt::format("stage {}: {} weights given, the layout has {}",
                                            stage(), host.size(), params_.size()));
  std::ranges::copy(host, params_.begin());
}

StageRuntime::View StageRuntime::weights_at(const Read& read) const {
  return read.source == VersionBook::kCurrent ? View(params_)
                                              : View(stash_[static_cast<std::size_t>(read.source)]);
}

void StageRuntime::input_grad(std::int32_t mb, View d_output, MutableView d_input) {
  const Read read = backward_read(mb);
  const std::size_t i = w_book_.hold(mb, read.version);
  stage_.backward_input(weights_at(read), activations_.at(mb), d_output, d_input, w_stashes_[i]);
}

void StageRuntime::weight_grad(std::int32_t mb) {
  const WeightStashBook::Held held = w_book_.release(mb);
  stage_.backward_weight(grads_, activations_.at(mb), w_stashes_[held.stash]);
  activations_.release(mb);
  book_.backward(mb, held.version);  // read at I; its gradient joins this version's step
}

void StageRuntime::forward(std::int32_t mb, const Input& input,
                           std::span<const std::int32_t> targets, Loss* loss) {
  model::ActivationSlot& slot = activations_.acquire(mb);
  book_.forward(mb);
  if (!stage_.is_last()) {
    stage_.forward(params_, input, slot, plan_.loss_scale);
    record_routing(mb, slot);
    return;
  }
  const float value = stage_.forward_loss(params_, input, targets, plan_.loss_scale, slot);
  record_routing(mb, slot);
  if (!std::isfinite(value))
    throw std::runtime_error(fmt::format("loss is {} at micro-batch {} (optimizer step {})", value,
                                         mb, optimizer_.steps()));
  if (loss) *loss = value;
}

StageRuntime::View StageRuntime::output(std::int32_t mb) {
  return activations_.at(mb).output();
}

void StageRuntime::backward(std::int32_t mb, View d_output, MutableView d_input) {
  const Read read = backward_read(mb);
  stage_.backward(weights_at(read), grads_, activations_.at(mb), d_output, d_input);
  activations_.release(mb);
  book_.backward(mb, read.version);
}

void StageRuntime::add_gradients(View twin) {
  if (twin.size() != grads_.size())
    throw std::invalid_argument(fmt::format("stage {}: {} twin gradients for {} weights", stage(),
                                            twin.size(), grads_.size()));
  for (std::size_t i = 0; i < grads_.size(); ++i) grads_[i] += twin[i];
}

void StageRuntime::update() {
  const Update u = begin_update();
  if (u.keep_in != VersionBook::kCurrent)
    std::ranges::copy(params_, stash_[static_cast<std::size_t>(u.keep_in)].begin());
  float grad_scale = 1.0f;
  if (plan_.clip > 0.0)
    grad_scale = model::clip_coefficient(model::squared_norm(grads_), plan_.clip);
  optimizer_.step(params_, grads_, plan_.lr.at(u.step), grad_scale);
  model::zero(grads_);
  if (const auto i = take_snapshot(u.step, snapshots_.size()))
    std::ranges::copy(params_, snapshots_[*i].begin());
}

std::int64_t StageRuntime::static_bytes() const {
  return 4 * static_cast<std::int64_t>(stage_.layout().bytes());  // params, grads, m, v
}

std::int64_t StageRuntime::memory_bytes() const {
  // Output gradients kept from an I for its W.
  const auto awaiting_w = static_cast<std::int64_t>(w_book_.in_use() * weight_stash_bytes());
  return static_bytes() + awaiting_w +
         static_cast<std::int64_t>(activations_.in_use() * activations_.slot_bytes()) +
         static_cast<std::int64_t>(book_.stash_in_use()) *
             static_cast<std::int64_t>(stage_.layout().bytes());
}

void StageRuntime::write_image(model::ImageWriter& out) const {
  out.put(std::span<const float>(grads_));
  book_.save_image(out);
  for (const auto& copy : stash_) out.put(std::span<const float>(copy));
  activations_.save_image(out);
  for (const auto& w : w_stashes_) w.save_image(out);
  w_book_.save_image(out);
  out.put(static_cast<std::uint64_t>(snapshots_taken_));
  for (const auto& copy : snapshots_) out.put(std::span<const float>(copy));
  out.put(std::span<const float>(aux_losses_));
  out.put(std::span<const std::int64_t>(expert_tokens_));
}

void StageRuntime::copy_state_to(model::StageState& into) const {
  PACI_MODEL_CHECK(into.weights.size() == params_.size() &&
                       into.first_moment.size() == params_.size() &&
                       into.second_moment.size() == params_.size(),
                   "stage {}: a state of {} weights for a layout of {} (a part of the experts is "
                   "assembled into a whole stage by exec::assemble_expert_parts)",
                   stage(), into.weights.size(), params_.size());
  std::ranges::copy(params_, into.weights.begin());
  std::ranges::copy(optimizer_.first_moment(), into.first_moment.begin());
  std::ranges::copy(optimizer_.second_moment(), into.second_moment.begin());
  into.optimizer_steps = optimizer_.steps();
}

void StageRuntime::copy_state_from(const model::StageState& from) {
  if (from.weights.size() != params_.size() && !layout().shard().whole()) {
    const model::ParamLayout whole(layout().config(), layout().range());
    model::copy_tensors(whole, from.weights, layout(), params_);
    model::copy_tensors(whole, from.first_moment, layout(), optimizer_.first_moment());
    model::copy_tensors(whole, from.second_moment, layout(), optimizer_.second_moment());
  } else {
    PACI_MODEL_CHECK(from.weights.size() == params_.size() &&
                         from.first_moment.size() == params_.size() &&
                         from.second_moment.size() == params_.size(),
                     "stage {}: a state of {} weights for a layout of {}", stage(),
                     from.weights.size(), params_.size());
    std::ranges::copy(from.weights, params_.begin());
    std::ranges::copy(from.first_moment, optimizer_.first_moment().begin());
    std::ranges::copy(from.second_moment, optimizer_.second_moment().begin());
  }
  optimizer_.set_steps(from.optimizer_steps);
}

std::size_t StageRuntime::image_bytes() const {
  model::ImageWriter counter;
  write_image(counter);
  return counter.size();
}

void StageRuntime::save_image(std::span<std::byte> out) const {
  PACI_MODEL_CHECK(out.size() == image_bytes(), "stage {}: image buffer of {} bytes, {} needed",
                   stage(), out.size(), image_bytes());
  model::ImageWriter writer(out);
  write_image(writer);
}

void StageRuntime::load_image(std::span<const std::byte> in, const std::string& what) {
  model::ImageReader reader(in, what);
  if (in.size() != image_bytes())
    throw InputError(
        fmt::format("{}: image of {} bytes, this stage's runtime has {} (another schedule, shape "
                    "or partition?)",
                    what, in.size(), image_bytes()));
  reader.get(std::span<float>(grads_));
  book_.load_image(reader);
  for (auto& copy : stash_) reader.get(std::span<float>(copy));
  activations_.load_image(reader);
  for (auto& w : w_stashes_) w.load_image(reader);
  w_book_.load_image(reader);
  snapshots_taken_ = reader.get<std::uint64_t>();
  reader.check(
      snapshots_taken_ <= snapshots_.size(),
      fmt::format("{} validation snapshots taken of {}", snapshots_taken_, snapshots_.size()));
  for (auto& copy : snapshots_) reader.get(std::span<float>(copy));
  reader.get(std::span<float>(aux_losses_));
  reader.get(std::span<std::int64_t>(expert_tokens_));
  for (const std::int64_t n : expert_tokens_) reader.check(n >= 0, "a negative expert count");
  reader.finish();
}

void StageRuntime::check_image(std::span<const Action> before_cut, const std::string& what) const {
  VersionBook book(plan_.stage, plan_.policy, plan_.stash_capacity, plan_.updates,
                   plan_.total_microbatches);
  std::vector<std::int64_t> held, awaiting_w;
  std::vector<std::pair<std::int64_t, std::int32_t>> read_at_i;  // micro-batch, version its I read
  const auto drop = [](std::vector<std::int64_t>& v, std::int64_t mb) { std::erase(v, mb); };
  for (const Action& a : before_cut) {
    if (a.stage != plan_.stage) continue;
    std::int32_t version = -1;
    switch (a.kind) {
      case ActionKind::F:
        book.forward(a.microbatch);
        held.push_back(a.microbatch);
        break;
      case ActionKind::B:
        book.backward_source(a.microbatch, &version);
        book.backward(a.microbatch, version);
        drop(held, a.microbatch);
        break;
      case ActionKind::I:
        book.backward_source(a.microbatch, &version);
        read_at_i.emplace_back(a.microbatch, version);
        awaiting_w.push_back(a.microbatch);
        break;
      case ActionKind::W:
        for (const auto& [mb, v] : read_at_i)
          if (mb == a.microbatch) version = v;
        book.backward(a.microbatch, version);
        drop(held, a.microbatch);
        drop(awaiting_w, a.microbatch);
        break;
      case ActionKind::U:
        book.update();
        break;
    }
  }
  if (!(book == book_))
    throw InputError(fmt::format(
        "{}: its weight versions are not those of the schedule's actions before the cut", what));
  std::sort(held.begin(), held.end());
  if (held != activations_.held())
    throw InputError(fmt::format(
        "{}: its activations are not those of the micro-batches in flight at the cut", what));
  const std::vector<std::int64_t> kept = w_book_.held();
  for (const std::int64_t held_mb : kept) {
    bool read_there = false;
    for (const auto& [mb, v] : read_at_i)
      read_there = read_there || (mb == held_mb && w_book_.holds(mb, v));
    if (!read_there)
      throw InputError(
          fmt::format("{}: an input gradient awaiting its W that the cut does not have", what));
  }
  std::sort(awaiting_w.begin(), awaiting_w.end());
  if (kept != awaiting_w)
    throw InputError(
        fmt::format("{}: its input gradients awaiting W are not those in flight at the cut", what));
}

}  // namespace paci::exec
