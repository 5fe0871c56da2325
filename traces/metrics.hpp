// Timing metrics of a run, predicted or measured, from the start and end of every action:
// makespan, busy time per device and stage, bubble ratio over the whole run and over the steady
// window (definitions in docs/metrics.md).
#pragma once

#include <cstdint>
#include <vector>

#include "schedules/ir.hpp"
#include "traces/timeline.hpp"

namespace paci {

struct TimingMetrics {
  double makespan_s = 0.0;  // last end minus first start (the run starts at 0)
  std::vector<double> device_busy_s;
  std::vector<double> stage_busy_s;
  double bubble_ratio = 0.0;  // 1 - sum(busy) / (devices * makespan)
  // The steady window leaves out the first and the last optimizer step and the pipeline's fill
  // and drain: from the moment every stage has finished its first U, to the earliest moment a
  // stage starts its last step or the first stage starts its last forward. NaN when the window is
  // empty (fewer than 3 steps, or a drain longer than the middle steps).
  double steady_start_s = 0.0;
  double steady_end_s = 0.0;
  double steady_bubble_ratio = 0.0;
  // The Zero Bubble paper's definition (Qi et al., ICLR 2024): 1 − (a device's F, B, I and W
  // time) / (its span, from its first action's start to its last action's end), for the device
  // whose span is the longest. It leaves out the optimizer (U) and each device's idle time before
  // its first action, so it compares with that paper's tables (one step: N = 1).
  double zb_bubble_ratio = 0.0;
};

TimingMetrics timing_metrics(const Schedule& schedule, const ActionTimes& times);

}  // namespace paci
