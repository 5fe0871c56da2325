// Replay of a measured run (paci simulate --replay): the engine runs the schedule with each
// action's measured duration, each message's measured delay and the measured work a device does
// around its actions, instead of a cost model. When the engine's dependency, device-order and
// link logic are right, every replayed start equals the measured one; compare_replay() says which
// actions started elsewhere and what each was waiting for.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "schedules/ir.hpp"
#include "traces/report_timeline.hpp"

namespace paci {

struct ReplayAction {
  double duration_s = 0.0;  // measured end - start
  double gap_s = 0.0;       // start - when the action was ready (receiving, waking up)
  double post_s = 0.0;      // when the device was free again - end (sending)
};

struct ReplayInputs {
  std::vector<std::vector<ReplayAction>> actions;  // aligned with schedule.devices
  // Per ActionIndex vertex: its cross-device input is available this long after the producer's
  // end (the measured send end minus the producer's end); NaN when it has none.
  std::vector<double> message_delay_s;
};

// Derives the replay's inputs from a measured timeline of `schedule`. Every cross-device input
// that DependencyRules names must have a message record, and every record must be such an input;
// otherwise InputError (starting with `source`) naming the message.
ReplayInputs replay_inputs(const Schedule& schedule, const MeasuredTimeline& measured,
                           std::string_view source);

struct ReplayMismatch {
  Action action;
  std::int32_t device = 0;
  double measured_start_s = 0.0, replayed_start_s = 0.0;
  std::string why;  // what each side waited for
};

struct ReplayComparison {
  double measured_makespan_s = 0.0, replayed_makespan_s = 0.0;
  double measured_bubble = 0.0, replayed_bubble = 0.0;
  double max_start_error_s = 0.0;  // over every action, |replayed - measured start|
  Action worst_action;
  std::int64_t actions = 0;
  std::int64_t off = 0;                 // actions whose start differs by more than the tolerance
  std::vector<ReplayMismatch> largest;  // up to 10 of them, largest difference first
  double makespan_error() const { return replayed_makespan_s / measured_makespan_s - 1.0; }
};

// Compares a replay (times from simulate() with the inputs above) with the measured run; an
// action is off when its start differs by more than tolerance_s.
ReplayComparison compare_replay(const Schedule& schedule, const MeasuredTimeline& measured,
                                const ReplayInputs& inputs, const ActionTimes& replayed,
                                double tolerance_s);

}  // namespace paci
