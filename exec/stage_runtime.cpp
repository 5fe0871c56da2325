// StageRuntime: forward, backward and update of one stage under its weight policy, with the
// versions read and the memory in use recorded as they happen.
#include "exec/stage_runtime.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>

namespace paci::exec {

StageRuntime::StageRuntime(const StageRuntimeConfig& config)
    : config_(config),
      stage_(config.shape, config.threads),
      params_(stage_.layout().size(), 0.0f),
      grads_(stage_.layout().size(), 0.0f),
      optimizer_(stage_.layout(), config.adamw, config.threads),
      activations_(config.shape, std::max<std::size_t>(config.activation_capacity, 1)),
      readers_(static_cast<std::size_t>(config.updates) + 1, 0),
      v_f_(static_cast<std::size_t>(config.total_microbatches), -1),
      v_b_(static_cast<std::size_t>(config.total_microbatches), -1),
      update_(static_cast<std::size_t>(config.total_microbatches), -1) {
  config_.lr.validate();
  if (config.policy != WeightPolicy::current) {
    stash_.resize(config.stash_capacity);
    for (auto& s : stash_) s.params.assign(params_.size(), 0.0f);
  }
  if (config.snapshot_every > 0) {
    // Multiples of snapshot_every among the global steps (offset, offset + updates].
    const std::size_t k = static_cast<std::size_t>(config.snapshot_every);
    const std::size_t end = config.lr_step_offset + static_cast<std::size_t>(config.updates);
    snapshots_.assign(end / k - config.lr_step_offset / k,
                      std::vector<float>(params_.size(), 0.0f));
  }
}

float StageRuntime::forward(std::int32_t mb, const model::StageInput& input,
                            std::span<const std::int32_t> targets) {
  model::ActivationSlot& slot = activations_.acquire(mb);
  v_f_[static_cast<std::size_t>(mb)] = version_;
  ++readers_[static_cast<std::size_t>(version_)];
  if (!stage_.is_last()) {
    stage_.forward(params_, input, slot);
    return 0.0f;
  }
  const float loss = stage_.forward_loss(params_, input, targets, config_.loss_scale, slot);
  if (!std::isfinite(loss))
    throw std::runtime_error(fmt::format("loss is {} at micro-batch {} (optimizer step {})", loss,
                                         mb, optimizer_.steps()));
  return loss;
}

std::span<const float> StageRuntime::output(std::int32_t mb) {
  return activations_.at(mb).output();
}

std::span<const float> StageRuntime::weights_for_backward(std::int32_t mb,
                                                          std::int32_t& version_read) {
  const std::int32_t forward_version = v_f_[static_cast<std::size_t>(mb)];
  if (config_.policy == WeightPolicy::current || forward_version == version_) {
    version_read = version_;
    return params_;
  }
  for (const auto& s : stash_)
    if (s.version == forward_version) {
      version_read = s.version;
      return s.params;
    }
  throw std::logic_error(
      fmt::format("stage {}: version {} read by F of micro-batch {} was not "
                  "stashed",
                  config_.stage, forward_version, mb));
}

void StageRuntime::backward(std::int32_t mb, std::span<const float> d_output,
                            std::span<float> d_input) {
  std::int32_t version_read = -1;
  const std::span<const float> weights = weights_for_backward(mb, version_read);
  stage_.backward(weights, grads_, activations_.at(mb), d_output, d_input);
  activations_.release(mb);
  v_b_[static_cast<std::size_t>(mb)] = version_read;
  update_[static_cast<std::size_t>(mb)] = version_;
  const std::int32_t forward_version = v_f_[static_cast<std::size_t>(mb)];
  if (--readers_[static_cast<std::size_t>(forward_version)] == 0 && forward_version != version_)
    for (auto& s : stash_)
      if (s.version == forward_version) {
        s.version = -1;  // no in-flight backward needs it any more
        --stash_in_use_;
      }
}

void StageRuntime::update() {
  if (config_.policy != WeightPolicy::current && readers_[static_cast<std::size_t>(version_)] > 0) {
    // In-flight forwards read the current version: keep a copy for their backwards.
    auto free = std::find_if(stash_.begin(), stash_.end(),
                             [](const StashedVersion& s) { return s.version < 0; });
    if (free == stash_.end())
      throw std::runtime_error(fmt::format(
          "stage {} needs more than {} weight versions alive (the schedule's weight policy "
          "allows fewer)",
          config_.stage, stash_.size() + 1));
    std::copy(params_.begin(), params_.end(), free->params.begin());
    free->version = version_;
    peak_stash_in_use_ = std::max(peak_stash_in_use_, ++stash_in_use_);
  }
  float grad_scale = 1.0f;
  if (config_.clip > 0.0)
    grad_scale = model::clip_coefficient(model::squared_norm(grads_), config_.clip);
  const std::size_t step = config_.lr_step_offset + static_cast<std::size_t>(version_);
  optimizer_.step(params_, grads_, config_.lr.at(step), grad_scale);
  model::zero(grads_);
  ++version_;
  if (config_.snapshot_every > 0 &&
      (step + 1) % static_cast<std::size_t>(config_.snapshot_every) == 0 &&
      snapshots_taken_ < snapshots_.size())
    std::copy(params_.begin(), params_.end(), snapshots_[snapshots_taken_++].begin());
}

std::int64_t StageRuntime::static_bytes() const {
  return 4 * static_cast<std::int64_t>(stage_.layout().bytes());  // params, grads, m, v
}

std::int64_t StageRuntime::memory_bytes() const {
  return static_bytes() +
         static_cast<std::int64_t>(activations_.in_use() * activations_.slot_bytes()) +
         static_cast<std::int64_t>(stash_in_use_) *
             static_cast<std::int64_t>(stage_.layout().bytes());
}

}  // namespace paci::exec
