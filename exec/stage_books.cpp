// StageBooks: the version, stash and snapshot bookkeeping both stage runtimes share.
#include "exec/stage_books.hpp"

#include <algorithm>

namespace paci::exec {

StageBooks::StageBooks(const StagePlan& plan, std::size_t activation_slots)
    : plan_(plan),
      book_(plan.stage, plan.policy, plan.stash_capacity, plan.updates, plan.total_microbatches) {
  plan_.lr.validate();
  if (plan.shape.config.moe.enabled() && plan.shape.range.num_layers > 0) {
    aux_losses_.assign(static_cast<std::size_t>(plan.total_microbatches), 0.0f);
    expert_tokens_.assign(plan.shape.range.num_layers * plan.shape.config.moe.experts, 0);
  }
  if (plan.split_backward)
    w_book_ = WeightStashBook(plan.stage, std::max<std::size_t>(activation_slots, 1));
}

StageBooks::Read StageBooks::backward_read(std::int32_t mb) const {
  Read read;
  read.source = book_.backward_source(mb, &read.version);
  return read;
}

StageBooks::Update StageBooks::begin_update() {
  Update u;
  u.step = plan_.lr_step_offset + static_cast<std::size_t>(book_.version());
  u.keep_in = book_.update();  // keep the current weights if in-flight forwards read them
  return u;
}

std::optional<std::size_t> StageBooks::take_snapshot(std::size_t step, std::size_t capacity) {
  if (!plan_.snapshot_after(step) || snapshots_taken_ >= capacity) return std::nullopt;
  return snapshots_taken_++;
}

}  // namespace paci::exec
