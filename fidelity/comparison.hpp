// paci fidelity's comparison of a schedule's prediction with its measured runs: a row per
// schedule (what was predicted with the pooled calibration, the one taken first and independent
// devices; the drift-following prediction; every measured run and its replay), its JSON and the
// markdown table of all rows.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "exec/executor.hpp"
#include "exec/train_setup.hpp"
#include "sim/cost_model.hpp"
#include "traces/report.hpp"

namespace paci::fidelity {

// One schedule of the comparison: what was predicted, and every measured run.
struct ComparisonRow {
  std::string kind;
  bool processes = false;  // one process per device (MPI), else one process
  std::size_t group = 0;  // its calibration: the schedules of one partition and placement share one
  exec::TrainSetup setup;
  RunSummary predicted, independent, calibrated_first;  // with the pooled calibration
  // The prediction that follows the machine's drift: the median of each run's simulation with
  // the probe of the stages alone taken right before it (fidelity/prediction.hpp).
  double drift_makespan_s = 0.0;
  std::vector<double> drift_factors;  // one per measured run
  std::vector<RunSummary> measured;
  std::vector<double> replay_makespan_errors, replay_start_errors;  // relative to the makespan
};

// The median of `values` (exec::spread_of's).
double median(std::vector<double> values);

// Replays one measured run with its own times: the largest makespan and start differences,
// relative to the measured makespan.
std::pair<double, double> replay_errors(const Schedule& schedule, const exec::ExecResult& result,
                                        const CostModel& costs);

// The row as JSON: predicted (drift-following) and pooled makespans, the measured median, range
// and runs, the verdict against `tolerance` and its note, the other predictions' errors, bubbles,
// the replay's largest differences, staleness, activations and memory, and every stage's.
ordered_json row_json(const ComparisonRow& row, double tolerance);

// The markdown table of row_json()s.
std::string rows_markdown(const ordered_json& rows);

}  // namespace paci::fidelity
