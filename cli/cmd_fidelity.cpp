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
#include "exec/fingerprint.hpp"
#include "exec/machine.hpp"
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

struct FidelityOptions {
  std::string kinds_text = "gpipe,1f1b,pipedream,2bw,paci,zb-h1,zb-h2,interleaved", processes_text,
              json_path, markdown_path;
  fidelity::ComparisonOptions comparison;
};

// The setup every row shares (its model, data and shape); --chunks is interleaved's alone.
TrainSetup shared_setup(TrainFlags f, const po::variables_map& vm) {
  if (f.ep != 1)
    throw UsageError("--ep is paci train's: fidelity runs and predicts one process a device");
  f.chunks = 0;
  return make_train_setup(f, vm);
}

// The comparison, printed and written by process 0.
int compare(TrainFlags& f, const po::variables_map& vm, FidelityOptions& fo,
            const fidelity::ProcessLinks* mp) {
  fidelity::ComparisonOptions& o = fo.comparison;
  o.kinds = parse_kinds(fo.kinds_text);
  o.process_kinds =
      fo.processes_text.empty() ? std::vector<std::string>{} : parse_kinds(fo.processes_text);
  o.stages = f.stages;
  o.microbatches = f.microbatches;
  o.steps = f.steps;
  const bool main = !mp || mp->links->local_device() == 0;
  const bool show = main && !f.quiet && isatty(STDERR_FILENO);
  f.quiet = true;
  const auto setup_for = [&](const std::string& kind) {
    if (kind.empty()) return shared_setup(f, vm);
    TrainFlags fk = f;
    fk.kind = kind;
    if (kind != "interleaved") fk.chunks = 0;
    fk.schedule_path.clear();
    return make_train_setup(fk, vm);
  };
  fidelity::Progress progress;
  if (show)
    progress = [](const std::string& what) {
      std::cerr << fmt::format("\rfidelity: {:<60}", what) << std::flush;
    };
  const std::optional<fidelity::Comparison> c = fidelity::compare(setup_for, o, mp, progress);
  if (!c) return 0;
  if (show) std::cerr << "\r" << std::string(72, ' ') << "\r";
  const ordered_json& out = c->document;
  const exec::Calibration& calibration = c->calibration;
  const exec::Calibration& first = c->first;
  const double tolerance = c->tolerance;
  const std::string& md = c->markdown;
  if (!fo.json_path.empty()) write_output(fo.json_path, out.dump(2) + "\n");
  if (!fo.markdown_path.empty()) write_output(fo.markdown_path, md);
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
  for (const auto& [stages, devices] : c->other_groups)
    std::cout << fmt::format(
        "interleaved rows: their own calibration, of {} stages on {} devices (their partition)\n",
        stages, devices);
  for (const auto& note : c->skipped) std::cout << "skipped: " << note << '\n';
  for (const auto* k : {&first, &calibration})
    if (!k->stable)
      std::cout << (k == &first ? "calibration before the runs "
                                : "calibration alongside the runs ")
                << fidelity::settling_note(*k) << '\n';
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
  add("repeats", po::value(&o.comparison.repeats)->default_value(o.comparison.repeats),
      "measured runs per schedule, taken round-robin across the schedules");
  add("calibration-repeats", po::value(&o.comparison.calibration.repeats)->default_value(9),
      "timed repeats per action and calibration round");
  add("tolerance", po::value(&o.comparison.tolerance)->default_value(0.0, "5% at P <= 2, else 10%"),
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
        if (o.comparison.repeats == 0 || o.comparison.repeats > 1000)
          throw InputError("--repeats must be 1..1000");
        if (!std::isfinite(o.comparison.tolerance) || o.comparison.tolerance < 0 ||
            o.comparison.tolerance >= 1)
          throw InputError(fmt::format("--tolerance must be a fraction in [0, 1), got {}",
                                       o.comparison.tolerance));
        if (o.comparison.calibration.repeats == 0 || o.comparison.calibration.repeats > 100000)
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
    fidelity::check_process_kinds(parse_kinds(o.processes_text), f.stages, f.microbatches, f.steps,
                                  f.chunks);
    timeout = exec::link_timeout();
    return shared_setup(f, vm);
  });
  std::optional<exec::mpi::MpiLinks> mpi;
  try {
    const std::string settings =
        fmt::format("fidelity {} {} {} {} {} {}", f.stages, f.microbatches, f.steps,
                    o.comparison.repeats, o.processes_text, o.kinds_text);
    mpi.emplace(exec::fingerprint(settings, run_fingerprint(shape, f)), timeout);
    fidelity::ProcessLinks mp;
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
