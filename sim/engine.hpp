// The discrete-event simulator: replays a validated schedule under a cost model. Each device runs
// its list in order on its compute lane; activations and gradients that cross devices travel on
// per-link send/receive lanes (latency + bytes / bandwidth, FIFO per link) overlapping compute;
// devices that share a host (CostModel::hosts) slow each other down while they compute at once;
// memory is tracked over time; the versions each F and B read are recorded.
#pragma once

#include <cstdint>
#include <vector>

#include "schedules/analysis.hpp"
#include "schedules/ir.hpp"
#include "sim/cost_model.hpp"
#include "traces/timeline.hpp"

namespace paci {

struct ReplayInputs;  // sim/replay.hpp

struct SimOptions {
  bool record_timeline = true;  // compute/message slices and memory samples (needed for traces)
  // Replay a measured run: its durations, message delays and device overheads instead of the
  // cost model's durations, links and host sharing (the cost model still gives the bytes).
  const ReplayInputs* replay = nullptr;
};

struct CriticalPath {
  double length_s = 0.0;         // = makespan
  double compute_s = 0.0;        // time on the path spent in actions
  double communication_s = 0.0;  // time on the path spent waiting for messages
  std::vector<Action> actions;   // first to last
};

struct SimResult {
  std::int64_t events = 0;  // events processed by the queue
  std::vector<std::int64_t> device_peak_memory_bytes;
  std::vector<std::int64_t> device_static_bytes;
  Analysis observed;  // versions read, peak activations and weight versions seen in the run
  CriticalPath critical_path;
  ActionTimes times;  // start and end of every action, aligned with schedule.devices
  Timeline timeline;  // source "simulated"; empty slices unless options.record_timeline
};

// Throws InputError when the cost model does not fit the schedule, and std::runtime_error if the
// schedule deadlocks (validate() first to get the marked grid instead).
SimResult simulate(const Schedule& schedule, const CostModel& costs,
                   const SimOptions& options = {});

}  // namespace paci

#include "traces/report.hpp"

namespace paci {

// The simulated run in the shared report's terms (timing metrics from the action times).
RunSummary run_summary(const Schedule& schedule, const CostModel& costs, const SimResult& result);

}  // namespace paci
