// The comparison rows of paci fidelity: JSON, markdown, replay.
#include "fidelity/comparison.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "exec/calibrate.hpp"
#include "fidelity/prediction.hpp"
#include "schedules/analysis.hpp"
#include "sim/engine.hpp"
#include "sim/replay.hpp"

namespace paci::fidelity {

double median(std::vector<double> v) {
  return exec::spread_of(std::move(v)).median;
}

namespace {

// The measured run whose makespan is the median one (the lower middle for an even count).
const RunSummary& median_run(const ComparisonRow& row) {
  std::vector<std::size_t> order(row.measured.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return row.measured[a].timing.makespan_s < row.measured[b].timing.makespan_s;
  });
  return row.measured[order[(order.size() - 1) / 2]];
}

}  // namespace

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

ordered_json row_json(const ComparisonRow& row, double tolerance) {
  std::vector<double> makespans;
  for (const auto& m : row.measured) makespans.push_back(m.timing.makespan_s);
  const exec::Spread spread = exec::spread_of(makespans);
  const RunSummary& typical = median_run(row);
  const Analysis analysis = analyze(row.setup.schedule);
  const double predicted = row.drift_makespan_s;
  const double pooled = row.predicted.timing.makespan_s;
  const Verdict verdict = judge(predicted, spread.median, spread.min, spread.max, tolerance);
  const double independent = row.independent.timing.makespan_s;
  bool staleness_equal = true, activations_equal = true;
  ordered_json stages = ordered_json::array();
  const std::int64_t pred_mem = *std::max_element(row.predicted.device_peak_memory_bytes.begin(),
                                                  row.predicted.device_peak_memory_bytes.end());
  const std::int64_t meas_mem = *std::max_element(typical.device_peak_memory_bytes.begin(),
                                                  typical.device_peak_memory_bytes.end());
  for (std::int32_t s = 0; s < row.setup.schedule.stages; ++s) {
    const auto i = static_cast<std::size_t>(s);
    const auto& p = row.predicted.observed.stages[i];
    for (const auto& m : row.measured) {
      staleness_equal = staleness_equal && p.max_staleness == m.observed.stages[i].max_staleness &&
                        p.max_staleness == analysis.stages[i].max_staleness;
      activations_equal =
          activations_equal && p.peak_activations == m.observed.stages[i].peak_activations;
    }
    const auto d = static_cast<std::size_t>(row.setup.schedule.placement[i]);
    stages.push_back(
        {{"stage", s},
         {"device", d},
         {"predicted_utilization", row.predicted.timing.stage_busy_s[i] / predicted},
         {"measured_utilization", typical.timing.stage_busy_s[i] / typical.timing.makespan_s},
         {"predicted_peak_memory_bytes", row.predicted.device_peak_memory_bytes[d]},
         {"measured_peak_memory_bytes", typical.device_peak_memory_bytes[d]},
         {"predicted_max_staleness", p.max_staleness},
         {"measured_max_staleness", typical.observed.stages[i].max_staleness},
         {"predicted_peak_activations", p.peak_activations},
         {"measured_peak_activations", typical.observed.stages[i].peak_activations}});
  }
  std::vector<double> bubbles;
  for (const auto& m : row.measured) bubbles.push_back(m.timing.bubble_ratio);
  ordered_json j;
  j["kind"] = row.kind;
  j["processes"] = row.processes ? row.setup.schedule.num_devices() : 1;
  j["devices"] = row.setup.schedule.num_devices();
  j["stages"] = row.setup.schedule.stages;
  j["microbatches"] = row.setup.schedule.microbatches;
  j["steps"] = row.setup.schedule.steps;
  j["predicted_makespan_s"] = predicted;
  j["pooled_makespan_s"] = pooled;
  j["drift_factors"] = row.drift_factors;
  j["independent_makespan_s"] = independent;
  j["calibrated_first_makespan_s"] = row.calibrated_first.timing.makespan_s;
  j["measured_makespan_s"] = spread.median;
  j["measured_min_s"] = spread.min;
  j["measured_max_s"] = spread.max;
  j["measured_makespans_s"] = makespans;
  j["relative_error"] = verdict.error;
  j["pooled_relative_error"] = pooled / spread.median - 1.0;
  j["tolerance"] = tolerance;
  j["holds"] = verdict.holds();
  j["spread_too_wide"] = verdict.spread_too_wide;
  const std::string label =
      row.processes ? fmt::format("{}, {} processes", row.kind, row.setup.schedule.num_devices())
                    : row.kind;
  j["note"] = verdict.note(label, predicted, spread.median, spread.min, spread.max, tolerance);
  j["independent_relative_error"] = independent / spread.median - 1.0;
  j["calibrated_first_relative_error"] =
      row.calibrated_first.timing.makespan_s / spread.median - 1.0;
  j["inside_range"] = verdict.inside_range;
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

std::string rows_markdown(const ordered_json& runs) {
  std::string md =
      "| schedule | predicted makespan (s) | measured median [min, max] (s) | error vs median | "
      "prediction inside the range | drift factor, median [min, max] | pooled, no drift factor "
      "(error) | calibrated first (error) | independent devices (error) | "
      "predicted bubble | measured bubble | replay, largest start difference | staleness equal | "
      "peak activations equal | peak memory (pred / meas, MiB) |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& r : runs) {
    const exec::Spread factors = exec::spread_of(r["drift_factors"].get<std::vector<double>>());
    md += fmt::format(
        "| {} | {:.3f} | {:.3f} [{:.3f}, {:.3f}] | {:+.1f}% | {} | {:.3f} [{:.3f}, {:.3f}] | "
        "{:.3f} ({:+.1f}%) | {:.3f} ({:+.1f}%) | {:.3f} "
        "({:+.1f}%) | {:.1f}% | {:.1f}% | {:.2g}% of the makespan | {} | {} | {:.1f} / {:.1f} |\n",
        r.value("processes", 1) > 1
            ? fmt::format("{}, {} processes (MPI)", r["kind"].get<std::string>(),
                          r["processes"].get<int>())
            : r["kind"].get<std::string>(),
        r["predicted_makespan_s"].get<double>(), r["measured_makespan_s"].get<double>(),
        r["measured_min_s"].get<double>(), r["measured_max_s"].get<double>(),
        100 * r["relative_error"].get<double>(), r["inside_range"].get<bool>() ? "yes" : "no",
        factors.median, factors.min, factors.max, r["pooled_makespan_s"].get<double>(),
        100 * r["pooled_relative_error"].get<double>(),
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
  }
  return md;
}

}  // namespace paci::fidelity
