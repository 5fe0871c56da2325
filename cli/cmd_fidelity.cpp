// paci fidelity — the simulator against the executor on this machine: calibrate a cost model
// (stages alone, and the slowdown of sharing the host) until it settles, run every schedule R
// times round-robin with one more calibration round before each round of runs (so slow and fast
// moments of a machine whose speed drifts fall on every schedule and on the calibration alike),
// simulate every schedule with the calibration pooled over the whole stretch — and, for
// comparison, with the one taken before any run, as a user calibrating first would — and compare
// with the measured median and range. Every measured run is also replayed (the engine checked
// apart from the cost model). Interleaved splits the model into P·v stages: it gets a
// calibration of its own partition, taken the same way. Writes JSON and a markdown table.
//
// Under mpirun (one process per device) with --processes KINDS, those schedules also run one
// process per device over MPI, predicted with the links between the processes measured first;
// process 0 calibrates, runs the one-process rows and writes everything while the others wait
// asleep at a barrier.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>

#include "cli/cli.hpp"
#include "cli/common.hpp"
#include "cli/load.hpp"
#include "cli/train_setup.hpp"
#include "exec/calibrate.hpp"
#include "exec/machine.hpp"
#include "exec/rank_plan.hpp"
#include "exec/rank_results.hpp"
#include "fidelity/calibration.hpp"
#include "fidelity/comparison.hpp"
#include "fidelity/prediction.hpp"
#include "schedules/analysis.hpp"
#include "schedules/generators.hpp"
#include "sim/compare_rows.hpp"
#include "sim/engine.hpp"
#include "sim/replay.hpp"
#ifdef PACI_HAVE_MPI
#include "cli/mpi_launch.hpp"
#include "exec/mpi/mpi_links.hpp"
#endif

namespace paci::cli {

namespace {

using Row = fidelity::ComparisonRow;
using fidelity::median;

// Under mpirun: this process's links to the others, and the links between every pair measured
// with them (on process 0).
struct Processes {
  exec::HostLinks* links = nullptr;
  // true: the links wait as long as process 0 takes (it calibrates and runs alone meanwhile);
  // false: back to the link timeout.
  std::function<void(bool)> patient;
  std::vector<exec::PairLinkMeasurement> pairs;
  std::vector<std::string> nodes;
};

struct FidelityOptions {
  std::string kinds_text = "gpipe,1f1b,pipedream,2bw,paci,zb-h1,zb-h2,interleaved", processes_text,
              json_path, markdown_path;
  std::size_t repeats = 5;
  double tolerance = 0.0;  // 0: 5% at P <= 2, else 10%
  exec::CalibrationOptions calibration;
};

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

std::string calibration_key(const TrainSetup& t) {
  std::string key;
  for (const auto& r : t.exec.ranges) key += fmt::format("{}+{},", r.first_layer, r.num_layers);
  return fmt::format("{}/{}", key, fmt::join(t.schedule.placement, ","));
}

// The setup every row shares (its model, data and shape); --chunks is interleaved's alone.
TrainSetup shared_setup(TrainFlags f, const po::variables_map& vm) {
  f.chunks = 0;
  return make_train_setup(f, vm);
}

// Kinds a configuration can rule out — 2bw (M < P) and interleaved (M not a multiple of P, or
// fewer layers than P·v) — are skipped with the generator's or the partition's reason; any other
// refusal is an error.
bool may_be_skipped(const std::string& kind) {
  return kind == "2bw" || kind == "interleaved";
}

// The whole comparison. With `mp`, every process of the launch calls it: process 0 calibrates,
// runs the one-process rows and writes; all of them run the rows of one process per device.
int compare(TrainFlags& f, const po::variables_map& vm, const FidelityOptions& o,
            const Processes* mp) {
  const bool main = !mp || mp->links->local_device() == 0;
  const bool progress = main && !f.quiet && isatty(STDERR_FILENO);
  f.quiet = true;
  const TrainSetup base = shared_setup(f, vm);

  std::vector<Row> rows;
  std::vector<std::string> skipped;
  std::vector<std::string> group_keys;
  std::vector<std::unique_ptr<CalibrationGroup>> groups;
  const auto add_rows = [&](const std::string& text, bool processes) {
    for (const auto& kind : parse_kinds(text)) {
      TrainFlags fk = f;
      fk.kind = kind;
      if (kind != "interleaved") fk.chunks = 0;
      fk.schedule_path.clear();
      Row row{kind, processes, 0, {}, {}, {}, {}, 0.0, {}, {}, {}, {}};
      try {
        row.setup = make_train_setup(fk, vm);  // interleaved: P·v stages of the model
      } catch (const UsageError&) {
        throw;  // the flags, not this kind
      } catch (const InputError& e) {
        if (!may_be_skipped(kind)) throw;
        skipped.push_back(fmt::format("{}{}: {}", kind, processes ? " (processes)" : "", e.what()));
        continue;
      }
      row.setup.exec.record_timeline = false;
      if (processes) {
        exec::check_launch(row.setup.schedule, row.setup.schedule.num_devices());
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
  add_rows(o.kinds_text, false);
  if (mp && !o.processes_text.empty()) add_rows(o.processes_text, true);
  if (rows.empty())
    throw InputError(fmt::format("no schedule left to compare ({})", fmt::join(skipped, "; ")));

  if (main) {
    if (mp) exec::unbind_from_cores("fidelity");
    for (std::size_t i = 0; i < groups.size(); ++i) {
      CalibrationGroup& g = *groups[i];
      if (progress)
        std::cerr << fmt::format("\rfidelity: calibrating {} stage(s) on {} device(s) ...",
                                 g.placement.size(), g.devices)
                  << std::flush;
      exec::CalibrationOptions options = o.calibration;
      options.devices = static_cast<std::size_t>(g.devices);
      g.calibrator.emplace(g.exec, options);
      while (!g.calibrator->settled() && g.calibrator->rounds() < options.max_rounds)
        g.calibrator->round();
      g.first = g.calibrator->result();
      // Also the replays' model: a replay takes its times from the run, only the bytes from here.
      g.first_costs = fidelity::cost_model_from_calibration(
          g.first, "calibrated by paci fidelity before the runs", g.placement);
      g.calibrator->discard();  // "alongside" pools only the rounds taken between the runs
    }
  }

  // Round-robin: a calibration round, then run r of every schedule, before run r + 1 of any.
  for (std::size_t r = 0; r < o.repeats; ++r) {
    if (main)
      for (auto& g : groups) g->calibrator->round();
    for (Row& row : rows) {
      if (!main && !row.processes) continue;
      // The others wait here, asleep, while process 0 calibrates and runs alone.
      if (row.processes) {
        mp->patient(true);
        mp->links->barrier();
        mp->patient(false);
      }
      if (progress)
        std::cerr << fmt::format("\rfidelity: run {}/{} of {:<11}{}", r + 1, o.repeats, row.kind,
                                 row.processes ? " (processes)" : "              ")
                  << std::flush;
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
          fidelity::replay_errors(row.setup.schedule, result, groups[row.group]->first_costs);
      row.replay_makespan_errors.push_back(makespan_error);
      row.replay_start_errors.push_back(start_error);
    }
  }
  if (!main) return 0;
  if (progress) std::cerr << "\r" << std::string(70, ' ') << "\r";
  for (auto& g : groups) {
    g->alongside = g->calibrator->result();
    g->costs = fidelity::cost_model_from_calibration(
        g->alongside, "calibrated by paci fidelity on this machine, alongside the runs",
        g->placement);
  }
  for (Row& row : rows) {
    const Schedule& s = row.setup.schedule;
    const CalibrationGroup& g = *groups[row.group];
    CostModel with = g.costs, before = g.first_costs;
    if (row.processes) {  // messages over MPI: the links measured between the processes
      fidelity::apply_process_links(with, mp->pairs, mp->nodes);
      fidelity::apply_process_links(before, mp->pairs, mp->nodes);
    }
    CostModel independent = with;
    independent.hosts.clear();
    row.predicted = run_summary(s, with, simulate(s, with, {false, nullptr}));
    row.drift_makespan_s = fidelity::drift_corrected_makespan(s, with, row.drift_factors);
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
  out["settings"] = {{"stages", f.stages},
                     {"microbatches", f.microbatches},
                     {"steps", f.steps},
                     {"repeats", o.repeats},
                     {"threads_per_stage", base.exec.threads_per_device}};
  out["calibration"] = fidelity::calibration_json(calibration);
  out["calibration_before_runs"] = fidelity::calibration_json(first);
  if (mp) out["process_links"] = fidelity::process_links_json(mp->pairs, mp->nodes);
  out["machine_cost_model"] = ordered_json::parse(write_cost_model(costs));
  // The other partitions' (interleaved: P·v stages on P devices), each with its placement.
  out["other_calibrations"] = ordered_json::array();
  for (std::size_t i = 1; i < groups.size(); ++i)
    out["other_calibrations"].push_back(
        {{"placement", groups[i]->placement},
         {"calibration", fidelity::calibration_json(groups[i]->alongside)},
         {"calibration_before_runs", fidelity::calibration_json(groups[i]->first)},
         {"cost_model", ordered_json::parse(write_cost_model(groups[i]->costs))}});
  out["skipped"] = skipped;
  out["runs"] = ordered_json::array();
  const double tolerance = o.tolerance > 0 ? o.tolerance : (f.stages <= 2 ? 0.05 : 0.10);
  out["settings"]["tolerance"] = tolerance;
  for (const Row& row : rows) out["runs"].push_back(fidelity::row_json(row, tolerance));
  const std::string md = fidelity::rows_markdown(out["runs"]);
  if (!o.json_path.empty()) write_output(o.json_path, out.dump(2) + "\n");
  if (!o.markdown_path.empty()) write_output(o.markdown_path, md);
  std::cout << fmt::format(
                   "P={} M={} N={} on {}\ncost model: {} calibration rounds, one before each "
                   "round of runs (before the runs: {} rounds until settled, the 'calibrated "
                   "first' column); slowdown with k = 1..{} stages computing at once: {:.3f}; "
                   "measured: {} runs per schedule, round-robin; predicted: each run's simulation "
                   "scaled by a probe taken right before it (every stage alone, twice, against the "
                   "calibration: its drift factor), the median over the runs\n",
                   f.stages, f.microbatches, f.steps, exec::machine_line(), calibration.rounds,
                   first.rounds, calibration.slowdown_by_count.size(),
                   fmt::join(calibration.slowdown_by_count, ", "), o.repeats)
            << (mp ? fidelity::process_links_summary(mp->pairs) : "") << md;
  for (std::size_t i = 1; i < groups.size(); ++i)
    std::cout << fmt::format(
        "interleaved rows: their own calibration, of {} stages on {} devices (their partition)\n",
        groups[i]->placement.size(), groups[i]->devices);
  for (const auto& note : skipped) std::cout << "skipped: " << note << '\n';
  for (const auto* c : {&first, &calibration})
    if (!c->stable)
      std::cout << (c == &first ? "calibration before the runs "
                                : "calibration alongside the runs ")
                << fidelity::settling_note(*c) << '\n';
  std::size_t held = 0;
  for (const auto& r : out["runs"]) {
    held += r["holds"].get<bool>();
    if (!r["note"].get<std::string>().empty()) std::cout << r["note"].get<std::string>() << '\n';
  }
  std::cout << fmt::format(
      "{} of {} predictions inside the measured range or within {:.0f}% of the median\n", held,
      out["runs"].size(), 100 * tolerance);
  return 0;
}

}  // namespace

int run_fidelity(const std::vector<std::string>& args) {
  TrainFlags f;
  f.stages = 2;
  f.microbatches = 4;
  f.steps = 8;
  FidelityOptions o;
  po::options_description options("options");
  auto add = options.add_options();
  add("kinds", po::value(&o.kinds_text)->default_value(o.kinds_text),
      "schedules to compare; interleaved (--chunks v, default 2) is skipped, with a note, where "
      "the model has too few layers for P·v stages or M is not a multiple of P");
  add("processes", po::value(&o.processes_text),
      "under mpirun -np P: also run these schedules one process per device (MPI)");
  add("repeats", po::value(&o.repeats)->default_value(o.repeats),
      "measured runs per schedule, taken round-robin across the schedules");
  add("calibration-repeats", po::value(&o.calibration.repeats)->default_value(9),
      "timed repeats per action and calibration round");
  add("tolerance", po::value(&o.tolerance)->default_value(0.0, "5% at P <= 2, else 10%"),
      "how close to the measured median a prediction outside the runs' range must be (a "
      "fraction)");
  add("json", po::value(&o.json_path),
      "write every figure as JSON (docs/results/fidelity_P*.json)");
  add("markdown", po::value(&o.markdown_path), "write the table as markdown");
  add_train_options(options, f);
  po::variables_map vm;
  const exec::LaunchInfo launch = launch_info();
  if (!only_process_zero_says(launch, "fidelity", [&] {
        if (!parse_options("fidelity",
                           "[--stages 2 --microbatches 4 --steps 8] [--repeats R] [model flags] "
                           "[--json F] [--markdown F] (under mpirun: [--processes KINDS])",
                           options, {}, args, vm))
          return false;
        if (o.repeats == 0 || o.repeats > 1000) throw InputError("--repeats must be 1..1000");
        if (!std::isfinite(o.tolerance) || o.tolerance < 0 || o.tolerance >= 1)
          throw InputError(
              fmt::format("--tolerance must be a fraction in [0, 1), got {}", o.tolerance));
        if (o.calibration.repeats == 0 || o.calibration.repeats > 100000)
          throw InputError("--calibration-repeats must be 1..100000");
        if (!o.processes_text.empty()) parse_kinds(o.processes_text);
        if (launch.world_size == 1 && !o.processes_text.empty())
          throw InputError(fmt::format(
              "--processes runs schedules one process per device: start paci fidelity under "
              "mpirun -np {}",
              f.stages));
        return true;
      }))
    return 0;
  if (launch.world_size == 1) return compare(f, vm, o, nullptr);
#ifdef PACI_HAVE_MPI
  exec::mpi::Session session;
  std::chrono::seconds timeout{};
  const TrainSetup shape = agreed_setup(session, "fidelity", [&] {
    check_mpi_sees(launch, session.size(), "fidelity");
    check_one_process_per_device(session.size(), f.stages);
    for (const auto& kind : parse_kinds(o.processes_text)) {
      std::optional<Schedule> s;
      try {
        s = generate_schedule(kind, f.stages, f.microbatches, f.steps,
                              kind == "interleaved" ? f.chunks : 0);
      } catch (const InputError&) {
        if (!may_be_skipped(kind)) throw;
        continue;  // compare() skips it, with its reason
      }
      exec::check_launch(*s, f.stages);
    }
    timeout = exec::link_timeout();
    return shared_setup(f, vm);
  });
  std::optional<exec::mpi::MpiLinks> mpi;
  try {
    const std::string settings = fmt::format("fidelity {} {} {} {} {} {}", f.stages, f.microbatches,
                                             f.steps, o.repeats, o.processes_text, o.kinds_text);
    mpi.emplace(exec::fingerprint(settings, run_fingerprint(shape, f)), timeout);
    Processes mp;
    mp.links = &*mpi;
    mp.pairs = exec::mpi::measure_links(
        *mpi, shape.exec.batch * shape.exec.seq_len * shape.exec.config.d_model, 50);
    mp.nodes = exec::mpi::node_names(*mpi);
    mp.patient = [&](bool patient) {
      mpi->set_timeout(patient ? std::chrono::hours(24) : timeout);
    };
    const int code = compare(f, vm, o, &mp);
    mp.patient(true);  // process 0 writes the results
    mpi->barrier();
    return code;
  } catch (...) {
    end_launch("fidelity", mpi ? &*mpi : nullptr);
  }
#else
  refuse_without_mpi(launch, "running schedules one process per device");
#endif
}

}  // namespace paci::cli
