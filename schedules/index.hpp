// ActionIndex: where each action of a schedule sits (device, position in its list), found in O(1).
// Building it checks what every consumer relies on: stages and micro-batches in range, each
// action on the device its stage is placed on, no action twice.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "schedules/ir.hpp"

namespace paci {

struct ActionPos {
  std::int32_t device = -1;
  std::int64_t index = -1;
  bool valid() const { return device >= 0; }
  friend bool operator==(const ActionPos&, const ActionPos&) = default;
};

// An invalid schedule: the message says what breaks, `marked` says where (for render_grid).
struct ScheduleError : InputError {
  ScheduleError(const std::string& message, std::vector<ActionPos> marked_actions)
      : InputError(message), marked(std::move(marked_actions)) {}
  std::vector<ActionPos> marked;
};

class ActionIndex {
 public:
  // Throws ScheduleError on a stage or micro-batch out of range, an action on the wrong device,
  // or a duplicated action. Call check_metadata() first.
  explicit ActionIndex(const Schedule& schedule);

  // Dense id of an action in [0, size()): device lists concatenated in device order.
  // Returns -1 when the schedule does not contain the action (F, B, I, W only; not U).
  std::int64_t vertex(const Action& action) const;
  std::int64_t vertex(ActionPos pos) const {
    return offsets_[static_cast<std::size_t>(pos.device)] + pos.index;
  }
  ActionPos position(std::int64_t vertex) const;
  ActionPos find(const Action& action) const {
    const std::int64_t v = vertex(action);
    return v < 0 ? ActionPos{} : position(v);
  }
  std::int64_t size() const { return offsets_.back(); }

 private:
  std::int64_t slot(const Action& a) const {
    return (static_cast<std::int64_t>(a.kind) * stages_ + a.stage) * total_microbatches_ +
           a.microbatch;
  }
  std::int32_t stages_ = 0;
  std::int64_t total_microbatches_ = 0;
  std::vector<std::int64_t> offsets_;  // device -> first vertex id; size devices+1
  std::vector<std::int32_t> slots_;    // (kind F/B/I/W, stage, microbatch) -> vertex id or -1
};

// Renders the per-device grid, marking the actions in `marked` with >...< and a ^ line under
// them. Long lists show only windows around the marks.
std::string render_grid(const Schedule& schedule, const std::vector<ActionPos>& marked);

}  // namespace paci
