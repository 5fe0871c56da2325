// paci calibrate — measures per-stage F, B, U and the transport on this machine and writes a cost
// model (paci.costmodel/1) that paci simulate reads. Under mpirun (one process per device, as
// paci train runs there), it also measures the MPI link between every pair of processes, and the
// cost model carries them (process 0 writes it).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>
#include <algorithm>
#include <iostream>
#include <optional>
#include <thread>

#include "cli/cli.hpp"
#include "cli/common.hpp"
#include "cli/load.hpp"
#include "cli/train_setup.hpp"
#include "exec/calibrate.hpp"
#include "exec/drift.hpp"
#include "exec/executor.hpp"
#include "exec/fingerprint.hpp"
#include "exec/machine.hpp"
#include "fidelity/calibration.hpp"
#include "fidelity/drift_report.hpp"
#include "fidelity/layer_calibration.hpp"
#include "sim/cost_model.hpp"
#ifdef PACI_HAVE_MPI
#include "cli/mpi_launch.hpp"
#include "exec/mpi/mpi_links.hpp"
#endif

namespace paci::cli {

namespace {

// The links between the processes of a launch, as process 0 gathered them.
struct MeasuredLinks {
  std::vector<exec::PairLinkMeasurement> pairs;
  std::vector<std::string> nodes;
};

// Calibrates every stage here, writes the cost model (with the links between processes, when
// given) and the details.
int write_calibration(const TrainSetup& t, const TrainFlags& f, const exec::CalibrationOptions& o,
                      const std::string& output, const std::string& details_path,
                      const MeasuredLinks* links) {
  const fidelity::CalibratedModel m = fidelity::calibrate_setup(
      t, o, links ? &links->pairs : nullptr, links ? &links->nodes : nullptr);
  const exec::Calibration& c = m.calibration;
  const CostModel& model = m.model;
  if (!details_path.empty()) write_output(details_path, m.details.dump(2) + "\n");
  write_output(output, write_cost_model(model));
  if (!f.quiet && output != "-")
    std::cerr << fmt::format("paci calibrate: wrote {} ({} stages)\n{}{}", output,
                             model.stages.size(), fidelity::calibration_summary(c),
                             links ? fidelity::process_links_summary(links->pairs) : "");
  return 0;
}

// Flags of paci calibrate --drift.
struct DriftFlags {
  double seconds = 0.0;  // 0: no watch
  double window_s = 60.0;
  std::size_t after_runs = 0;
};

// Calibrates until settled, optionally trains the schedule a few times (a process that has just
// trained), then watches every stage alone and under load for the given time, and prints the
// windows (every sample in --details).
int watch_drift(const TrainSetup& t, const TrainFlags& f, const exec::CalibrationOptions& o,
                const DriftFlags& d, const std::string& details_path) {
  const bool progress = !f.quiet && isatty(STDERR_FILENO);
  const fidelity::DriftRun run =
      fidelity::watch_after_training(t, o, d.seconds, d.after_runs, [&](const std::string& what) {
        if (progress) std::cerr << fmt::format("\rcalibrate: {:<56}", what) << std::flush;
      });
  const exec::DriftWatch& watch = run.watch;
  if (progress) std::cerr << "\r" << std::string(60, ' ') << "\r";
  const std::size_t stages = run.stages;
  const auto windows = exec::drift_windows(watch, stages, d.window_s);
  std::cout << fmt::format(
                   "drift on {}: {} stage(s) alone, one F, B, U each in turn, for {:.0f} s{}, a "
                   "load probe (every stage computing at once, {:.2f} s) every 5 s against the "
                   "calibration taken first ({} rounds{})\n",
                   exec::machine_line(), stages, d.seconds,
                   d.after_runs ? fmt::format(", right after {} training runs of {}", d.after_runs,
                                              t.schedule.kind)
                                : ", in a process that has not trained",
                   run.probe_window_s, run.rounds, run.settled ? "" : ", not settled")
            << fidelity::drift_table(watch, windows, stages);
  if (!details_path.empty()) {
    ordered_json j = fidelity::drift_json(watch, windows, stages, d.window_s);
    j["machine"] = exec::machine_json();
    j["after_runs"] = d.after_runs;
    j["kind"] = t.schedule.kind;
    write_output(details_path, j.dump(1) + "\n");
  }
  return 0;
}

}  // namespace

int run_calibrate(const std::vector<std::string>& args) {
  TrainFlags f;
  std::string output = "-", details_path;
  exec::CalibrationOptions o;
  bool independent = false;
  po::options_description options("options");
  auto add = options.add_options();
  add("output,o", po::value(&output)->default_value("-"), "cost model JSON (- for stdout)");
  add("repeats", po::value(&o.repeats)->default_value(o.repeats),
      "timed repeats per action and round (median)");
  add("max-rounds", po::value(&o.max_rounds)->default_value(o.max_rounds),
      "rounds of repeats at most, until every median moves by less than 1% in a round");
  add("independent", po::bool_switch(&independent),
      "do not measure how stages slow each other down (every device independent)");
  add("details", po::value(&details_path), "write every measured figure with its spread (JSON)");
  bool links_only = false;
  add("links-only", po::bool_switch(&links_only),
      "under mpirun: measure only the links between processes (written with --details or -o)");
  DriftFlags drift;
  add("drift", po::value(&drift.seconds),
      "instead of a cost model: calibrate, then time every stage alone (and all at once, every "
      "5 s) for this many seconds, and print how far the times move between windows of "
      "--drift-window seconds and within them (every sample with --details)");
  add("drift-window", po::value(&drift.window_s)->default_value(drift.window_s),
      "--drift: seconds per window");
  add("after-runs", po::value(&drift.after_runs)->default_value(0),
      "--drift: first train the schedule (--kind, -m, -n) this many times, as a process that has "
      "just trained");
  bool per_layer = false;
  add("per-layer", po::bool_switch(&per_layer),
      "instead of a cost model: time one layer, the embedding and the head for the threads a "
      "stage gets on 1, 2 and 4 stage threads, with their sharing and link (paci.layers/1), for "
      "paci plan --cluster FILE to cost any partition of the model");
  add_train_options(options, f);
  po::variables_map vm;
  const exec::LaunchInfo launch = launch_info();
  if (!only_process_zero_says(launch, "calibrate", [&] {
        return parse_options(
            "calibrate",
            "--stages P [--kind interleaved --chunks v: P·v stages on P devices] [model flags, "
            "--partition, --threads] [--repeats R] [-o C] "
            "(under mpirun: also the links between processes; --links-only)",
            options, {}, args, vm);
      }))
    return 0;
  o.measure_sharing = !independent;
  const auto setup = [&] {
    if (o.repeats == 0 || o.repeats > 100000) throw InputError("--repeats must be 1..100000");
    if (o.max_rounds == 0 || o.max_rounds > 1000) throw InputError("--max-rounds must be 1..1000");
    if (launch.world_size == 1 && links_only)
      throw InputError("--links-only measures the links between processes: run it under mpirun");
    if (f.ep != 1)
      throw UsageError("--ep is paci train's: calibrate measures one process a device");
    // The costs do not depend on M; the schedule it places stages by must exist (interleaved
    // wants M a multiple of P).
    if (!given(vm, "microbatches")) f.microbatches = f.stages;
    return make_train_setup(f, vm);
  };
  if (given(vm, "drift") || given(vm, "after-runs")) {
    if (!(drift.seconds > 0) || drift.seconds > 7 * 24 * 3600.0)
      throw InputError(
          fmt::format("--drift must be 0 < seconds <= one week, got {}", drift.seconds));
    if (!(drift.window_s > 0) || drift.window_s > drift.seconds)
      throw InputError(fmt::format("--drift-window must be 0 < seconds <= --drift ({}), got {}",
                                   drift.seconds, drift.window_s));
    if (drift.after_runs > 1000) throw InputError("--after-runs must be 0..1000");
    if (launch.world_size > 1)
      throw InputError("--drift watches this process's stages: run it without mpirun");
    if (given(vm, "output")) throw UsageError("--drift prints its windows; -o does not apply");
    return watch_drift(setup(), f, o, drift, details_path);
  }
  if (per_layer) {
    if (launch.world_size > 1)
      throw InputError("--per-layer times the stage threads of one process: run it without mpirun");
    for (const char* flag : {"stages", "partition", "threads", "kind", "chunks", "links-only"})
      if (given(vm, flag))
        throw UsageError(fmt::format(
            "--per-layer times single-layer stages on every thread count itself: --{} does not "
            "apply",
            flag));
    const TrainSetup t = setup();
    if (t.exec.config.moe.enabled())
      throw UsageError(
          "--per-layer calibrates the dense GPT that paci plan --cpu plans: a mixture of experts "
          "(--experts) has no CPU plan yet; calibrate it without --per-layer");
    const auto cores = static_cast<std::int32_t>(std::max(1u, std::thread::hardware_concurrency()));
    const plan::LayerCalibration c = fidelity::calibrate_layers(
        t.exec, o, cores, 4,
        fmt::format("{}: {}", exec::machine_line(), "paci calibrate --per-layer"));
    write_output(output, plan::write_layer_calibration(c));
    if (!f.quiet && output != "-")
      std::cerr << fmt::format(
          "paci calibrate: wrote {} (a layer {:.1f} ms F + {:.1f} ms B alone "
          "with {} thread(s))\n",
          output, 1e3 * c.threads.back().layer.forward_s, 1e3 * c.threads.back().layer.backward_s,
          c.threads.back().threads_per_stage);
    return 0;
  }
  if (launch.world_size == 1)
    return write_calibration(setup(), f, o, output, details_path, nullptr);
#ifdef PACI_HAVE_MPI
  // One process per device: all of them time the links, then process 0 calibrates the stages (as
  // one process would: the stages' threads share its node's cores) and writes everything, while
  // the others wait at a barrier, asleep (a process inside MPI_Finalize would spin on a core).
  exec::mpi::Session session;
  std::chrono::seconds timeout{};
  const TrainSetup t = agreed_setup(session, "calibrate", [&] {
    check_mpi_sees(launch, session.size(), "calibrate");
    TrainSetup checked = setup();
    if (!links_only) check_one_process_per_device(session.size(), checked.schedule.num_devices());
    timeout = exec::link_timeout();
    return checked;
  });
  std::optional<exec::mpi::MpiLinks> mpi;
  try {
    const std::string settings =
        fmt::format("calibrate {} {} {} {} {}", t.exec.batch, t.exec.seq_len, t.exec.config.d_model,
                    o.repeats, links_only);
    mpi.emplace(exec::fingerprint(settings), timeout);
    MeasuredLinks links;
    links.pairs =
        exec::mpi::measure_links(*mpi, t.exec.batch * t.exec.seq_len * t.exec.config.d_model,
                                 std::max<std::size_t>(o.repeats, 50));
    links.nodes = exec::mpi::node_names(*mpi);
    mpi->set_timeout(std::chrono::hours(24));  // process 0 calibrates as long as it takes
    if (session.rank() == 0) {
      if (links_only) {
        const std::string text =
            fidelity::process_links_json(links.pairs, links.nodes).dump(2) + "\n";
        write_output(details_path.empty() ? output : details_path, text);
        if (!f.quiet) std::cerr << fidelity::process_links_summary(links.pairs);
      } else {
        exec::unbind_from_cores("calibrate");
        write_calibration(t, f, o, output, details_path, &links);
      }
    }
    mpi->barrier();
    return 0;
  } catch (...) {
    end_launch("calibrate", mpi ? &*mpi : nullptr);
  }
#else
  refuse_without_mpi(launch, "measuring the links between processes");
#endif
}

}  // namespace paci::cli
