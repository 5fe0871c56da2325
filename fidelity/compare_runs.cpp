// compare(): the calibrations, the round-robin runs and the predictions of paci fidelity.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <memory>

#include "exec/machine.hpp"
#include "exec/rank_plan.hpp"
#include "exec/rank_results.hpp"
#include "fidelity/calibration.hpp"
#include "fidelity/comparison.hpp"
#include "fidelity/prediction.hpp"
#include "schedules/generators.hpp"
#include "sim/engine.hpp"

namespace paci::fidelity {

namespace {

// One calibration, for the rows whose schedules share a partition and placement (interleaved's
// P·v stages on P devices need their own): taken until settled before any run ("calibrated
// first"), then one round before each round of runs, pooled ("alongside").
struct CalibrationGroup {
  exec::ExecConfig exec;  // the Calibrator keeps a reference: a group never moves
  std::vector<std::int32_t> placement;
  std::int32_t devices = 0;
  std::optional<exec::Calibrator> calibrator;
  exec::Calibration first, alongside;
  CostModel first_costs, costs;
};

std::string calibration_key(const exec::TrainSetup& t) {
  std::string key;
  for (const auto& r : t.exec.ranges) key += fmt::format("{}+{},", r.first_layer, r.num_layers);
  return fmt::format("{}/{}", key, fmt::join(t.schedule.placement, ","));
}

}  // namespace

// Kinds a configuration can rule out — 2bw (M < P), interleaved (M not a multiple of P, or
// fewer layers than P·v), zb-v (fewer layers than 2P) and dualpipev (that, or M < 2P) — are
// skipped with the generator's or the partition's reason; any other refusal is an error.
bool may_be_skipped(const std::string& kind) {
  return kind == "2bw" || kind == "interleaved" || v_shaped(kind);
}

void check_process_kinds(const std::vector<std::string>& kinds, std::int32_t stages,
                         std::int32_t microbatches, std::int32_t steps, std::int32_t chunks) {
  for (const auto& kind : kinds) {
    std::optional<Schedule> s;
    try {
      s = generate_schedule(kind, stages, microbatches, steps, kind == "interleaved" ? chunks : 0);
    } catch (const InputError&) {
      if (!may_be_skipped(kind)) throw;
      continue;  // compare() skips it, with its reason
    }
    exec::check_launch(*s, stages, false);  // over MpiLinks: early messages are kept
  }
}

std::optional<Comparison> compare(const SetupFor& setup_for, const ComparisonOptions& o,
                                  const ProcessLinks* mp, const Progress& progress) {
  const bool main = !mp || mp->links->local_device() == 0;
  const exec::TrainSetup base = setup_for("");

  std::vector<ComparisonRow> rows;
  std::vector<std::string> skipped;
  std::vector<std::string> group_keys;
  std::vector<std::unique_ptr<CalibrationGroup>> groups;
  const auto add_rows = [&](const std::vector<std::string>& kinds, bool processes) {
    for (const auto& kind : kinds) {
      ComparisonRow row{kind, processes, 0, {}, {}, {}, {}, 0.0, {}, {}, {}, {}};
      try {
        row.setup = setup_for(kind);  // interleaved: P·v stages of the model
      } catch (const UsageError&) {
        throw;  // the flags, not this kind
      } catch (const InputError& e) {
        if (!may_be_skipped(kind)) throw;
        skipped.push_back(fmt::format("{}{}: {}", kind, processes ? " (processes)" : "", e.what()));
        continue;
      }
      row.setup.exec.record_timeline = false;
      if (processes) {
        exec::check_launch(row.setup.schedule, row.setup.schedule.num_devices(), false);
        row.setup.exec.remote = mp->links;
      }
      const std::string key = calibration_key(row.setup);
      const auto at = std::find(group_keys.begin(), group_keys.end(), key);
      row.group = static_cast<std::size_t>(at - group_keys.begin());
      if (at == group_keys.end()) {
        group_keys.push_back(key);
        auto g = std::make_unique<CalibrationGroup>();
        g->exec = row.setup.exec;
        g->exec.remote = nullptr;
        g->placement = row.setup.schedule.placement;
        g->devices = row.setup.schedule.num_devices();
        groups.push_back(std::move(g));
      }
      rows.push_back(std::move(row));
    }
  };
  add_rows(o.kinds, false);
  if (mp) add_rows(o.process_kinds, true);
  if (rows.empty())
    throw InputError(fmt::format("no schedule left to compare ({})", fmt::join(skipped, "; ")));

  if (main) {
    if (mp) exec::unbind_from_cores("fidelity");
    for (std::size_t i = 0; i < groups.size(); ++i) {
      CalibrationGroup& g = *groups[i];
      if (progress && main)
        progress(fmt::format("calibrating {} stage(s) on {} device(s) ...", g.placement.size(),
                             g.devices));
      exec::CalibrationOptions options = o.calibration;
      options.devices = static_cast<std::size_t>(g.devices);
      g.calibrator.emplace(g.exec, options);
      while (!g.calibrator->settled() && g.calibrator->rounds() < options.max_rounds)
        g.calibrator->round();
      g.first = g.calibrator->result();
      // Also the replays' model: a replay takes its times from the run, only the bytes from here.
      g.first_costs = cost_model_from_calibration(
          g.first, "calibrated by paci fidelity before the runs", g.placement);
      g.calibrator->discard();  // "alongside" pools only the rounds taken between the runs
    }
  }

  // Round-robin: a calibration round, then run r of every schedule, before run r + 1 of any.
  for (std::size_t r = 0; r < o.repeats; ++r) {
    if (main)
      for (auto& g : groups) g->calibrator->round();
    for (ComparisonRow& row : rows) {
      if (!main && !row.processes) continue;
      // The others wait here, asleep, while process 0 calibrates and runs alone.
      if (row.processes) {
        mp->patient(true);
        mp->links->barrier();
        mp->patient(false);
      }
      if (progress && main)
        progress(fmt::format("run {}/{} of {:<11}{}", r + 1, o.repeats, row.kind,
                             row.processes ? " (processes)" : "              "));
      // How fast the stages compute right now, each alone, against the pooled calibration's
      // medians: this run's drift factor.
      if (main) row.drift_factors.push_back(groups[row.group]->calibrator->probe_alone(2).factor());
      exec::Executor ex(row.setup.schedule, row.setup.exec);
      exec::ExecResult result = ex.run();
      if (row.processes) {  // every process's part, merged on process 0
        const Schedule& s = row.setup.schedule;
        const auto parts =
            mp->links->gather(exec::encode_rank_result(s, result, mp->links->local_device()), 0);
        if (!main) continue;
        result = exec::merge_rank_results(s, parts);
      }
      row.measured.push_back(ex.summary(result));
      const auto [makespan_error, start_error] =
          replay_errors(row.setup.schedule, result, groups[row.group]->first_costs);
      row.replay_makespan_errors.push_back(makespan_error);
      row.replay_start_errors.push_back(start_error);
    }
  }
  if (!main) return std::nullopt;
  for (auto& g : groups) {
    g->alongside = g->calibrator->result();
    g->costs = cost_model_from_calibration(
        g->alongside, "calibrated by paci fidelity on this machine, alongside the runs",
        g->placement);
  }
  for (ComparisonRow& row : rows) {
    const Schedule& s = row.setup.schedule;
    const CalibrationGroup& g = *groups[row.group];
    CostModel with = g.costs, before = g.first_costs;
    if (row.processes) {  // messages over MPI: the links measured between the processes
      apply_process_links(with, mp->pairs, mp->nodes);
      apply_process_links(before, mp->pairs, mp->nodes);
    }
    CostModel independent = with;
    independent.hosts.clear();
    row.predicted = run_summary(s, with, simulate(s, with, {false, nullptr}));
    row.drift_makespan_s = drift_corrected_makespan(s, with, row.drift_factors);
    row.independent = run_summary(s, independent, simulate(s, independent, {false, nullptr}));
    row.calibrated_first = run_summary(s, before, simulate(s, before, {false, nullptr}));
  }
  // The machine's calibration: the P stages' (the others, interleaved's, come after).
  const std::size_t main_group = static_cast<std::size_t>(
      std::find(group_keys.begin(), group_keys.end(), calibration_key(base)) - group_keys.begin());
  if (main_group < groups.size()) std::swap(groups[0], groups[main_group]);
  const exec::Calibration& calibration = groups.front()->alongside;
  const exec::Calibration& first = groups.front()->first;
  const CostModel& costs = groups.front()->costs;

  ordered_json out;
  out["machine"] = exec::machine_json();
  out["settings"] = {{"stages", o.stages},
                     {"microbatches", o.microbatches},
                     {"steps", o.steps},
                     {"repeats", o.repeats},
                     {"threads_per_stage", base.exec.threads_per_device}};
  out["calibration"] = calibration_json(calibration);
  out["calibration_before_runs"] = calibration_json(first);
  if (mp) out["process_links"] = process_links_json(mp->pairs, mp->nodes);
  out["machine_cost_model"] = ordered_json::parse(write_cost_model(costs));
  // The other partitions' (interleaved: P·v stages on P devices), each with its placement.
  out["other_calibrations"] = ordered_json::array();
  for (std::size_t i = 1; i < groups.size(); ++i)
    out["other_calibrations"].push_back(
        {{"placement", groups[i]->placement},
         {"calibration", calibration_json(groups[i]->alongside)},
         {"calibration_before_runs", calibration_json(groups[i]->first)},
         {"cost_model", ordered_json::parse(write_cost_model(groups[i]->costs))}});
  out["skipped"] = skipped;
  out["runs"] = ordered_json::array();
  const double tolerance = o.tolerance > 0 ? o.tolerance : (o.stages <= 2 ? 0.05 : 0.10);
  out["settings"]["tolerance"] = tolerance;
  for (const ComparisonRow& row : rows) out["runs"].push_back(row_json(row, tolerance));
  Comparison c;
  c.markdown = rows_markdown(out["runs"]);
  c.document = std::move(out);
  c.calibration = calibration;
  c.first = first;
  c.tolerance = tolerance;
  c.skipped = std::move(skipped);
  for (std::size_t i = 1; i < groups.size(); ++i)
    c.other_groups.emplace_back(groups[i]->placement.size(), groups[i]->devices);
  return c;
}

}  // namespace paci::fidelity
