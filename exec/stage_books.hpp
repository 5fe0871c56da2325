// StageBooks: what a stage runtime keeps the same way on either backend (StageRuntime on the CPU,
// GpuStageRuntime on the GPU), and the names both answer to: the stage's plan, the weight version
// every F and B read and the copies kept for in-flight backwards (VersionBook), the split
// backward's stashes from each I to its W (WeightStashBook), and the validation snapshots taken.
// Both runtimes derive from it; each moves the data these books point at (host vectors or device
// buffers) and nothing else.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "exec/stage_plan.hpp"
#include "exec/version_book.hpp"

namespace paci::exec {

class StageBooks {
 public:
  std::int32_t stage() const { return plan_.stage; }
  bool is_first() const { return plan_.shape.range.is_first(); }
  bool is_last() const { return plan_.shape.range.is_last(plan_.shape.config); }

  const VersionBook& versions() const { return book_; }
  std::int32_t version() const { return book_.version(); }
  std::int32_t v_f(std::int64_t mb) const { return book_.v_f(mb); }
  std::int32_t v_b(std::int64_t mb) const { return book_.v_b(mb); }
  std::int32_t update_of(std::int64_t mb) const { return book_.update_of(mb); }
  std::size_t peak_weight_versions() const { return book_.peak_weight_versions(); }
  // Weight copies taken so far for validation (StagePlan::snapshot_every).
  std::size_t snapshots() const { return snapshots_taken_; }
  // A mixture of experts: each micro-batch's load-balancing loss on this stage's blocks, summed
  // over them, as its forward computed it (unscaled); empty for a dense model.
  std::span<const float> aux_losses() const { return aux_losses_; }
  // And the tokens each expert of each of its blocks was chosen by, over this run's forwards
  // (blocks × E, before capacity; empty for a dense model): the routing's balance.
  std::span<const std::int64_t> expert_tokens() const { return expert_tokens_; }

 protected:
  // `activation_slots`: the runtime's slots; a stage that splits its backward gets one
  // weight-gradient stash per slot (an I holds its F's slot until its W).
  StageBooks(const StagePlan& plan, std::size_t activation_slots);

  // Where the weights that B(mb) or I(mb) reads are: VersionBook::kCurrent or a stash slot.
  struct Read {
    int source = VersionBook::kCurrent;
    std::int32_t version = -1;
  };
  Read backward_read(std::int32_t mb) const;

  // U: the optimizer step of the LR schedule (resumed runs counted) and the stash slot the current
  // weights must be copied into before they change (kCurrent: none); then the version advances.
  struct Update {
    std::size_t step = 0;
    int keep_in = VersionBook::kCurrent;
  };
  Update begin_update();
  // After U's step: the snapshot to copy the new weights into, when `step` keeps one and one of
  // the `capacity` preallocated copies is left.
  std::optional<std::size_t> take_snapshot(std::size_t step, std::size_t capacity);

  StagePlan plan_;
  VersionBook book_;
  WeightStashBook w_book_;  // empty unless the stage splits its backward
  std::size_t snapshots_taken_ = 0;
  std::vector<float> aux_losses_;            // per micro-batch of the schedule (MoE only)
  std::vector<std::int64_t> expert_tokens_;  // blocks × E (MoE only)
};

}  // namespace paci::exec
