// paci fidelity — the simulator against the executor on this machine: calibrate a cost model, then
// for every schedule simulate it and run it (median of repeats), and compare makespan,
// utilization, peak memory, staleness and peak activations. Writes JSON and a markdown table.
#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <iostream>

#include "cli/calibration.hpp"
#include "cli/common.hpp"
#include "cli/compare_rows.hpp"
#include "cli/load.hpp"
#include "cli/train_setup.hpp"
#include "exec/calibrate.hpp"
#include "schedules/analysis.hpp"
#include "schedules/generators.hpp"
#include "sim/engine.hpp"

namespace paci::cli {

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int run_fidelity(const std::vector<std::string>& args) {
  TrainFlags f;
  f.stages = 2;
  f.microbatches = 4;
  f.steps = 8;
  std::string kinds_text = "all", json_path, markdown_path;
  std::size_t repeats = 3, calibration_repeats = 9;
  po::options_description options("options");
  auto add = options.add_options();
  add("kinds", po::value(&kinds_text)->default_value("all"), "schedules to compare");
  add("repeats", po::value(&repeats)->default_value(3), "measured runs per schedule (median)");
  add("calibration-repeats", po::value(&calibration_repeats)->default_value(9),
      "timed repeats per action when calibrating");
  add("json", po::value(&json_path), "write docs/results/fidelity.json-style output");
  add("markdown", po::value(&markdown_path), "write a markdown table");
  add_train_options(options, f);
  po::variables_map vm;
  if (!parse_options("fidelity", "[--stages 2 --microbatches 4 --steps 8] [model flags] [--json F]",
                     options, {}, args, vm))
    return 0;
  if (repeats == 0 || calibration_repeats == 0) throw InputError("repeats must be positive");
  f.quiet = true;
  TrainSetup base = make_train_setup(f, vm);
  const exec::Calibration calibration = exec::calibrate(base.exec, calibration_repeats);
  const CostModel costs =
      cost_model_from_calibration(calibration, "calibrated by paci fidelity on this machine");

  ordered_json out;
  out["machine_cost_model"] = ordered_json::parse(write_cost_model(costs));
  out["runs"] = ordered_json::array();
  std::string md = fmt::format(
      "| schedule | predicted makespan (s) | measured makespan (s) | error | predicted bubble | "
      "measured bubble | staleness equal | peak activations equal | peak memory (pred / meas, "
      "MiB) |\n|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& kind : parse_kinds(kinds_text)) {
    if (kind == "2bw" && f.microbatches < f.stages) continue;
    TrainSetup t = make_train_setup(f, vm);
    t.schedule = generate_schedule(kind, f.stages, f.microbatches, f.steps);
    const SimResult sim = simulate(t.schedule, costs, {false});
    const RunSummary predicted = run_summary(t.schedule, costs, sim);
    std::vector<double> makespans;
    RunSummary measured;
    for (std::size_t r = 0; r < repeats; ++r) {
      exec::Executor ex(t.schedule, t.exec);
      const exec::ExecResult result = ex.run();
      measured = ex.summary(result);
      makespans.push_back(measured.timing.makespan_s);
    }
    const double measured_makespan = median(makespans);
    const Analysis analysis = analyze(t.schedule);
    bool staleness_equal = true, activations_equal = true;
    ordered_json stages = ordered_json::array();
    std::int64_t pred_mem = 0, meas_mem = 0;
    for (std::int32_t s = 0; s < t.schedule.stages; ++s) {
      const auto i = static_cast<std::size_t>(s);
      const auto& p = predicted.observed.stages[i];
      const auto& m = measured.observed.stages[i];
      staleness_equal = staleness_equal && p.max_staleness == m.max_staleness &&
                        m.max_staleness == analysis.stages[i].max_staleness;
      activations_equal = activations_equal && p.peak_activations == m.peak_activations;
      pred_mem = std::max(pred_mem, predicted.device_peak_memory_bytes[i]);
      meas_mem = std::max(meas_mem, measured.device_peak_memory_bytes[i]);
      stages.push_back(
          {{"stage", s},
           {"predicted_utilization",
            predicted.timing.stage_busy_s[i] / predicted.timing.makespan_s},
           {"measured_utilization", measured.timing.stage_busy_s[i] / measured.timing.makespan_s},
           {"predicted_peak_memory_bytes", predicted.device_peak_memory_bytes[i]},
           {"measured_peak_memory_bytes", measured.device_peak_memory_bytes[i]},
           {"predicted_max_staleness", p.max_staleness},
           {"measured_max_staleness", m.max_staleness},
           {"predicted_peak_activations", p.peak_activations},
           {"measured_peak_activations", m.peak_activations}});
    }
    const double error = predicted.timing.makespan_s / measured_makespan - 1.0;
    ordered_json row;
    row["kind"] = kind;
    row["stages"] = t.schedule.stages;
    row["microbatches"] = t.schedule.microbatches;
    row["steps"] = t.schedule.steps;
    row["predicted_makespan_s"] = predicted.timing.makespan_s;
    row["measured_makespan_s"] = measured_makespan;
    row["measured_makespans_s"] = makespans;
    row["relative_error"] = error;
    row["predicted_bubble_ratio"] = predicted.timing.bubble_ratio;
    row["measured_bubble_ratio"] = measured.timing.bubble_ratio;
    row["staleness_equal"] = staleness_equal;
    row["peak_activations_equal"] = activations_equal;
    row["per_stage"] = stages;
    out["runs"].push_back(row);
    md += fmt::format(
        "| {} | {:.3f} | {:.3f} | {:+.1f}% | {:.1f}% | {:.1f}% | {} | {} | {:.1f} / {:.1f} |\n",
        kind, predicted.timing.makespan_s, measured_makespan, 100 * error,
        100 * predicted.timing.bubble_ratio, 100 * measured.timing.bubble_ratio,
        staleness_equal ? "yes" : "NO", activations_equal ? "yes" : "NO",
        static_cast<double>(pred_mem) / (1 << 20), static_cast<double>(meas_mem) / (1 << 20));
  }
  if (!json_path.empty()) write_output(json_path, out.dump(2) + "\n");
  if (!markdown_path.empty()) write_output(markdown_path, md);
  std::cout << fmt::format(
                   "P={} M={} N={}; cost model calibrated here ({} repeats); measured "
                   "makespan: median of {} runs\n",
                   f.stages, f.microbatches, f.steps, calibration_repeats, repeats)
            << md;
  return 0;
}

}  // namespace paci::cli
