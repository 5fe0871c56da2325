// paci fidelity's comparison of the simulator with the executor on this machine, and its rows: a
// row per schedule (what was predicted with the pooled calibration, the one taken first and
// independent devices; the drift-following prediction; every measured run and its replay), its JSON
// and the markdown table of all rows.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "exec/calibrate.hpp"
#include "exec/executor.hpp"
#include "exec/remote.hpp"
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

// Under mpirun: this process's links to the others, and the links between every pair measured
// with them (on process 0).
struct ProcessLinks {
  exec::HostLinks* links = nullptr;
  // true: the links wait as long as process 0 takes (it calibrates and runs alone meanwhile);
  // false: back to the link timeout.
  std::function<void(bool)> patient;
  std::vector<exec::PairLinkMeasurement> pairs;
  std::vector<std::string> nodes;
};

struct ComparisonOptions {
  std::vector<std::string> kinds;          // run in this process
  std::vector<std::string> process_kinds;  // run one process per device (with ProcessLinks)
  std::int32_t stages = 2, microbatches = 4, steps = 8;  // for the document's settings
  std::size_t repeats = 5;
  double tolerance = 0.0;  // 0: 5% at P <= 2, else 10%
  exec::CalibrationOptions calibration;
};

// What process 0 reports: the document (paci fidelity --json: machine, settings, calibrations,
// the machine's cost model, skipped kinds, one row_json per schedule), its markdown table, the
// calibration pooled alongside the runs and the one taken first (of the P stages), the
// tolerance, the kinds skipped and why, and the other calibrations' (stages, devices).
struct Comparison {
  ordered_json document;
  std::string markdown;
  exec::Calibration calibration, first;
  double tolerance = 0.0;
  std::vector<std::string> skipped;
  std::vector<std::pair<std::size_t, std::int32_t>> other_groups;
};

// The setup of a kind's runs ("": the setup every row shares, without chunks): model, data,
// shape, partition; may throw InputError.
using SetupFor = std::function<exec::TrainSetup(const std::string& kind)>;
using Progress = std::function<void(const std::string& what)>;  // null: quiet

// Kinds a configuration can rule out — 2bw (M < P) and interleaved (M not a multiple of P, or
// fewer layers than P·v) — are skipped with the generator's or the partition's reason; any other
// refusal is an error.
bool may_be_skipped(const std::string& kind);

// Under mpirun -np P: InputError unless every one of `kinds` that its configuration does not rule
// out runs one process per device on P processes (exec::check_launch).
void check_process_kinds(const std::vector<std::string>& kinds, std::int32_t stages,
                         std::int32_t microbatches, std::int32_t steps, std::int32_t chunks);

// The whole comparison: calibrate each partition until settled, run every schedule `repeats`
// times round-robin with one calibration round before each round of runs and a probe of the
// stages alone right before each run, replay every run, predict with the pooled calibration,
// the one taken first, independent devices and the drift factors. With `processes`, every
// process of the launch calls it: process 0 calibrates, runs the one-process rows and returns
// the comparison; the others run the rows of one process per device and return nothing.
std::optional<Comparison> compare(const SetupFor& setup_for, const ComparisonOptions& options,
                                  const ProcessLinks* processes, const Progress& progress);

}  // namespace paci::fidelity
