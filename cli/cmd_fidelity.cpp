// paci fidelity — the simulator against the executor on this machine: calibrate a cost model
// (stages alone, and the slowdown of sharing the host) until it settles, run every schedule R
// times round-robin with one more calibration round before each round of runs (so slow and fast
// moments of a machine whose speed drifts fall on every schedule and on the calibration alike),
// simulate every schedule with the calibration pooled over the whole stretch — and, for
// comparison, with the one taken before any run, as a user calibrating first would — and compare
// with the measured median and range. Every measured run is also replayed (the engine checked
// apart from the cost model). Writes JSON and a markdown table.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <iostream>

#include "cli/calibration.hpp"
#include "cli/common.hpp"
#include "cli/compare_rows.hpp"
#include "cli/load.hpp"
#include "cli/machine.hpp"
#include "cli/train_setup.hpp"
#include "exec/calibrate.hpp"
#include "schedules/analysis.hpp"
#include "schedules/generators.hpp"
#include "sim/engine.hpp"
#include "sim/replay.hpp"

namespace paci::cli {

namespace {

// One schedule of the comparison: what was predicted, and every measured run.
struct Row {
  std::string kind;
  TrainSetup setup;
  RunSummary predicted, independent, calibrated_first;
  std::vector<RunSummary> measured;
  std::vector<double> replay_makespan_errors, replay_start_errors;  // relative to the makespan
};

double median(std::vector<double> v) {
  return exec::spread_of(std::move(v)).median;
}

// The measured run whose makespan is the median one (the lower middle for an even count).
const RunSummary& median_run(const Row& row) {
  std::vector<std::size_t> order(row.measured.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return row.measured[a].timing.makespan_s < row.measured[b].timing.makespan_s;
  });
  return row.measured[order[(order.size() - 1) / 2]];
}

// Replays one measured run with its own times: the largest makespan and start differences,
// relative to the measured makespan.
std::pair<double, double> replay_errors(const Schedule& s, const exec::ExecResult& result,
                                        const CostModel& costs) {
  const MeasuredTimeline measured{result.times, result.timeline.messages};
  const ReplayInputs inputs = replay_inputs(s, measured, "the measured run");
  SimOptions options;
  options.record_timeline = false;
  options.replay = &inputs;
  const SimResult replayed = simulate(s, costs, options);
  const ReplayComparison c = compare_replay(s, measured, inputs, replayed.times, 0.0);
  return {std::abs(c.makespan_error()), c.max_start_error_s / c.measured_makespan_s};
}

ordered_json row_json(const Row& row) {
  std::vector<double> makespans;
  for (const auto& m : row.measured) makespans.push_back(m.timing.makespan_s);
  const exec::Spread spread = exec::spread_of(makespans);
  const RunSummary& typical = median_run(row);
  const Analysis analysis = analyze(row.setup.schedule);
  const double predicted = row.predicted.timing.makespan_s;
  const double independent = row.independent.timing.makespan_s;
  bool staleness_equal = true, activations_equal = true;
  ordered_json stages = ordered_json::array();
  std::int64_t pred_mem = 0, meas_mem = 0;
  for (std::int32_t s = 0; s < row.setup.schedule.stages; ++s) {
    const auto i = static_cast<std::size_t>(s);
    const auto& p = row.predicted.observed.stages[i];
    for (const auto& m : row.measured) {
      staleness_equal = staleness_equal && p.max_staleness == m.observed.stages[i].max_staleness &&
                        p.max_staleness == analysis.stages[i].max_staleness;
      activations_equal =
          activations_equal && p.peak_activations == m.observed.stages[i].peak_activations;
    }
    pred_mem = std::max(pred_mem, row.predicted.device_peak_memory_bytes[i]);
    meas_mem = std::max(meas_mem, typical.device_peak_memory_bytes[i]);
    stages.push_back(
        {{"stage", s},
         {"predicted_utilization", row.predicted.timing.stage_busy_s[i] / predicted},
         {"measured_utilization", typical.timing.stage_busy_s[i] / typical.timing.makespan_s},
         {"predicted_peak_memory_bytes", row.predicted.device_peak_memory_bytes[i]},
         {"measured_peak_memory_bytes", typical.device_peak_memory_bytes[i]},
         {"predicted_max_staleness", p.max_staleness},
         {"measured_max_staleness", typical.observed.stages[i].max_staleness},
         {"predicted_peak_activations", p.peak_activations},
         {"measured_peak_activations", typical.observed.stages[i].peak_activations}});
  }
  std::vector<double> bubbles;
  for (const auto& m : row.measured) bubbles.push_back(m.timing.bubble_ratio);
  ordered_json j;
  j["kind"] = row.kind;
  j["stages"] = row.setup.schedule.stages;
  j["microbatches"] = row.setup.schedule.microbatches;
  j["steps"] = row.setup.schedule.steps;
  j["predicted_makespan_s"] = predicted;
  j["independent_makespan_s"] = independent;
  j["calibrated_first_makespan_s"] = row.calibrated_first.timing.makespan_s;
  j["measured_makespan_s"] = spread.median;
  j["measured_min_s"] = spread.min;
  j["measured_max_s"] = spread.max;
  j["measured_makespans_s"] = makespans;
  j["relative_error"] = predicted / spread.median - 1.0;
  j["independent_relative_error"] = independent / spread.median - 1.0;
  j["calibrated_first_relative_error"] =
      row.calibrated_first.timing.makespan_s / spread.median - 1.0;
  j["inside_range"] = predicted >= spread.min && predicted <= spread.max;
  j["predicted_bubble_ratio"] = row.predicted.timing.bubble_ratio;
  j["measured_bubble_ratio"] = median(bubbles);
  j["replay_max_makespan_error"] =
      *std::max_element(row.replay_makespan_errors.begin(), row.replay_makespan_errors.end());
  j["replay_max_start_error"] =
      *std::max_element(row.replay_start_errors.begin(), row.replay_start_errors.end());
  j["staleness_equal"] = staleness_equal;
  j["peak_activations_equal"] = activations_equal;
  j["predicted_peak_memory_bytes"] = pred_mem;
  j["measured_peak_memory_bytes"] = meas_mem;
  j["per_stage"] = stages;
  return j;
}

std::string markdown(const ordered_json& runs) {
  std::string md =
      "| schedule | predicted makespan (s) | measured median [min, max] (s) | error vs median | "
      "prediction inside the range | calibrated first (error) | independent devices (error) | "
      "predicted bubble | measured bubble | replay, largest start difference | staleness equal | "
      "peak activations equal | peak memory (pred / meas, MiB) |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& r : runs)
    md += fmt::format(
        "| {} | {:.3f} | {:.3f} [{:.3f}, {:.3f}] | {:+.1f}% | {} | {:.3f} ({:+.1f}%) | {:.3f} "
        "({:+.1f}%) | {:.1f}% | {:.1f}% | {:.2g}% of the makespan | {} | {} | {:.1f} / {:.1f} |\n",
        r["kind"].get<std::string>(), r["predicted_makespan_s"].get<double>(),
        r["measured_makespan_s"].get<double>(), r["measured_min_s"].get<double>(),
        r["measured_max_s"].get<double>(), 100 * r["relative_error"].get<double>(),
        r["inside_range"].get<bool>() ? "yes" : "no",
        r["calibrated_first_makespan_s"].get<double>(),
        100 * r["calibrated_first_relative_error"].get<double>(),
        r["independent_makespan_s"].get<double>(),
        100 * r["independent_relative_error"].get<double>(),
        100 * r["predicted_bubble_ratio"].get<double>(),
        100 * r["measured_bubble_ratio"].get<double>(),
        100 * r["replay_max_start_error"].get<double>(),
        r["staleness_equal"].get<bool>() ? "yes" : "NO",
        r["peak_activations_equal"].get<bool>() ? "yes" : "NO",
        static_cast<double>(r["predicted_peak_memory_bytes"].get<std::int64_t>()) / (1 << 20),
        static_cast<double>(r["measured_peak_memory_bytes"].get<std::int64_t>()) / (1 << 20));
  return md;
}

}  // namespace

int run_fidelity(const std::vector<std::string>& args) {
  TrainFlags f;
  f.stages = 2;
  f.microbatches = 4;
  f.steps = 8;
  std::string kinds_text = "all", json_path, markdown_path;
  std::size_t repeats = 5;
  exec::CalibrationOptions calibration_options;
  po::options_description options("options");
  auto add = options.add_options();
  add("kinds", po::value(&kinds_text)->default_value("all"), "schedules to compare");
  add("repeats", po::value(&repeats)->default_value(repeats),
      "measured runs per schedule, taken round-robin across the schedules");
  add("calibration-repeats", po::value(&calibration_options.repeats)->default_value(9),
      "timed repeats per action and calibration round");
  add("json", po::value(&json_path), "write every figure as JSON (docs/results/fidelity_P*.json)");
  add("markdown", po::value(&markdown_path), "write the table as markdown");
  add_train_options(options, f);
  po::variables_map vm;
  if (!parse_options("fidelity",
                     "[--stages 2 --microbatches 4 --steps 8] [--repeats R] [model flags] "
                     "[--json F] [--markdown F]",
                     options, {}, args, vm))
    return 0;
  if (repeats == 0 || repeats > 1000) throw InputError("--repeats must be 1..1000");
  if (calibration_options.repeats == 0 || calibration_options.repeats > 100000)
    throw InputError("--calibration-repeats must be 1..100000");
  const bool progress = !f.quiet && isatty(STDERR_FILENO);
  f.quiet = true;
  const TrainSetup base = make_train_setup(f, vm);
  if (progress) std::cerr << "fidelity: calibrating ..." << std::flush;
  exec::Calibrator calibrator(base.exec, calibration_options);
  while (!calibrator.settled() && calibrator.rounds() < calibration_options.max_rounds)
    calibrator.round();
  const exec::Calibration first = calibrator.result();
  // Also the replays' model: a replay takes its times from the run, only the bytes from here.
  const CostModel first_costs =
      cost_model_from_calibration(first, "calibrated by paci fidelity before the runs");
  calibrator.discard();  // "alongside" pools only the rounds taken between the runs

  std::vector<Row> rows;
  for (const auto& kind : parse_kinds(kinds_text)) {
    if (kind == "2bw" && f.microbatches < f.stages) continue;
    Row row{kind, make_train_setup(f, vm), {}, {}, {}, {}, {}, {}};
    row.setup.schedule = generate_schedule(kind, f.stages, f.microbatches, f.steps);
    row.setup.exec.record_timeline = false;
    rows.push_back(std::move(row));
  }
  // Round-robin: a calibration round, then run r of every schedule, before run r + 1 of any.
  for (std::size_t r = 0; r < repeats; ++r) {
    calibrator.round();
    for (Row& row : rows) {
      if (progress)
        std::cerr << fmt::format("\rfidelity: run {}/{} of {:<10}", r + 1, repeats, row.kind)
                  << std::flush;
      exec::Executor ex(row.setup.schedule, row.setup.exec);
      const exec::ExecResult result = ex.run();
      row.measured.push_back(ex.summary(result));
      const auto [makespan_error, start_error] =
          replay_errors(row.setup.schedule, result, first_costs);
      row.replay_makespan_errors.push_back(makespan_error);
      row.replay_start_errors.push_back(start_error);
    }
  }
  if (progress) std::cerr << "\r" << std::string(40, ' ') << "\r";
  const exec::Calibration calibration = calibrator.result();
  const CostModel costs = cost_model_from_calibration(
      calibration, "calibrated by paci fidelity on this machine, alongside the runs");
  CostModel independent_costs = costs;
  independent_costs.hosts.clear();
  for (Row& row : rows) {
    const Schedule& s = row.setup.schedule;
    row.predicted = run_summary(s, costs, simulate(s, costs, {false, nullptr}));
    row.independent =
        run_summary(s, independent_costs, simulate(s, independent_costs, {false, nullptr}));
    row.calibrated_first = run_summary(s, first_costs, simulate(s, first_costs, {false, nullptr}));
  }

  ordered_json out;
  out["machine"] = machine_json();
  out["settings"] = {{"stages", f.stages},
                     {"microbatches", f.microbatches},
                     {"steps", f.steps},
                     {"repeats", repeats},
                     {"threads_per_stage", base.exec.threads_per_device}};
  out["calibration"] = calibration_json(calibration);
  out["calibration_before_runs"] = calibration_json(first);
  out["machine_cost_model"] = ordered_json::parse(write_cost_model(costs));
  out["runs"] = ordered_json::array();
  for (const Row& row : rows) out["runs"].push_back(row_json(row));
  const std::string md = markdown(out["runs"]);
  if (!json_path.empty()) write_output(json_path, out.dump(2) + "\n");
  if (!markdown_path.empty()) write_output(markdown_path, md);
  std::cout << fmt::format(
                   "P={} M={} N={} on {}\ncost model: {} calibration rounds, one before each "
                   "round of runs (before the runs: {} rounds until settled, the 'calibrated "
                   "first' column); slowdown with k = 1..{} stages computing at once: {:.3f}; "
                   "measured: {} runs per schedule, round-robin\n",
                   f.stages, f.microbatches, f.steps, machine_line(), calibration.rounds,
                   first.rounds, calibration.slowdown_by_count.size(),
                   fmt::join(calibration.slowdown_by_count, ", "), repeats)
            << md;
  return 0;
}

}  // namespace paci::cli
