// A drift watch (exec/drift.hpp) for people and for files: a table of its windows, a summary of
// how far each stage's actions moved between windows and within them, and every sample as JSON.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "exec/drift.hpp"
#include "exec/train_setup.hpp"
#include "traces/report.hpp"

namespace paci::fidelity {

// One line per window: stage 0's F, B, U medians [min, max] (ms) and the load factor; then, per
// stage and action, the drift between windows and the spread within them.
std::string drift_table(const exec::DriftWatch& watch,
                        const std::vector<exec::DriftWindow>& windows, std::size_t stages);

// {"seconds", "window_s", "windows": [...], "summary": [...], "alone": [...], "loaded": [...]}
ordered_json drift_json(const exec::DriftWatch& watch,
                        const std::vector<exec::DriftWindow>& windows, std::size_t stages,
                        double window_s);

// paci calibrate --drift: a calibration until settled, then `after_runs` training runs of the
// setup's schedule (a process that has just trained), then every stage alone, one F, B, U each in
// turn, for `seconds`, with a load probe (every stage at once for a few of the slowest stage's
// actions) every 5 s. `progress` hears what it is doing.
struct DriftRun {
  exec::DriftWatch watch;
  std::size_t stages = 0, rounds = 0;
  bool settled = false;
  double probe_window_s = 0;
};
DriftRun watch_after_training(const exec::TrainSetup& t, const exec::CalibrationOptions& options,
                              double seconds, std::size_t after_runs,
                              const std::function<void(const std::string&)>& progress);

}  // namespace paci::fidelity
