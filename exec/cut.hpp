// A consistent cut of a pipeline run: for every device a position in its list, chosen so that no
// message is received before the receiver's position that was sent after the sender's (no
// orphan), plus what crosses it. Saving each stage's whole runtime state at its position and the
// messages crossing the cut, then starting every device there with that state restored,
// continues the run bitwise — for the asynchronous schedules too (PACI, PipeDream, 2BW), whose
// steps are not cuts: at a cut, forwards of a later step are in flight (their activations, the
// weight versions they read and messages in transit are part of the state).
// docs/checkpoints.md describes the file; the executor (exec/executor.hpp) takes and restores it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "exec/transport.hpp"
#include "model/checkpoint_state.hpp"
#include "schedules/ir.hpp"

namespace paci::exec {

struct CutMessage {
  MessageKey key;
  std::int32_t src = 0, dst = 0;  // devices
  std::int64_t sent_at = 0;       // the sender's position of the action that sends it
  friend bool operator==(const CutMessage&, const CutMessage&) = default;
};

struct CutPlan {
  std::int32_t updates = 0;             // every stage's `updates`-th update is the target
  std::vector<std::int64_t> positions;  // per device: the actions done before the cut
  std::vector<CutMessage> messages;     // sent before the cut and received after it
  std::uint64_t digest = 0;             // of the schedule's lists up to the positions
};

// The cut after every stage's `updates`-th update (1 <= updates < schedule.steps): each device
// starts at the position after its stages' last such update, and a receiver that would get a
// message its sender sends after the cut moves back to before that receive, until none does.
// This is the latest consistent cut at or before those positions, so the cuts after successive
// updates never move back. The schedule must have passed validate(). Throws InputError for
// updates out of range. The digest covers the kind, the weight policy and the lists up to the
// positions.
CutPlan plan_cut(const Schedule& schedule, std::int32_t updates);

// The same for many cuts of one schedule (its indexes built once); holds a reference to it.
class CutPlanner {
 public:
  explicit CutPlanner(const Schedule& schedule);
  ~CutPlanner();
  CutPlan plan(std::int32_t updates) const;

 private:
  struct Lowered;  // the lowered program (schedules/lower.hpp)
  const Schedule& schedule_;
  std::unique_ptr<Lowered> lowered_;
};

// One cut's saved state, as the executor fills it (sizes fixed by its plan and the stages'
// runtimes, allocated before the run) and as a resumed run restores it.
struct CutImage {
  CutPlan plan;
  std::vector<model::StageState> stages;        // per stage: weights, AdamW moments and steps
  std::vector<std::vector<std::byte>> runtime;  // per stage: StageRuntime::save_image
  std::vector<std::vector<float>> messages;     // per plan.messages entry: its data
  std::vector<float> losses;                    // per micro-batch: forward losses before the cut
};

}  // namespace paci::exec
