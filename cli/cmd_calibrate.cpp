// paci calibrate — measures per-stage F, B, U and the transport on this machine and writes a cost
// model (paci.costmodel/1) that paci simulate reads. Under mpirun (one process per device, as
// paci train runs there), it also measures the MPI link between every pair of processes, and the
// cost model carries them (process 0 writes it).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>
#include <iostream>
#include <optional>

#include "cli/calibration.hpp"
#include "cli/cli.hpp"
#include "cli/common.hpp"
#include "cli/load.hpp"
#include "cli/machine.hpp"
#include "cli/train_setup.hpp"
#include "exec/calibrate.hpp"
#include "exec/rank_plan.hpp"
#include "sim/cost_model.hpp"
#ifdef PACI_HAVE_MPI
#include "cli/mpi_launch.hpp"
#include "exec/mpi/mpi_links.hpp"
#endif

namespace paci::cli {

namespace {

std::string describe(const exec::Calibration& c, const TrainSetup& t) {
  char host[256] = "this machine";
  gethostname(host, sizeof host - 1);
  std::string partition;
  for (const auto& r : t.exec.ranges)
    partition += (partition.empty() ? "" : ",") + std::to_string(r.num_layers);
  if (t.schedule.num_devices() < t.schedule.stages)  // interleaved: say where each stage runs
    partition += fmt::format(" on devices {}", fmt::join(t.schedule.placement, ","));
  std::string sharing;
  for (std::size_t k = 1; k < c.slowdown_by_count.size(); ++k)
    sharing += fmt::format("{}{:.3f}", k == 1 ? "" : ",", c.slowdown_by_count[k]);
  return fmt::format(
      "calibrated on {} ({}): gpt L={} d={} heads={} T={} V={} B={}, partition {}, {} thread(s) "
      "per "
      "stage; each stage alone: medians of {} repeats x {} rounds{}; slowdown with 2.. "
      "stages computing at once: {}",
      host, machine_line(), t.exec.config.layers, t.exec.config.d_model, t.exec.config.heads,
      t.exec.seq_len, t.exec.config.vocab, t.exec.batch, partition, t.exec.threads_per_device,
      c.repeats, c.rounds, c.stable ? "" : " (not settled)", sharing.empty() ? "-" : sharing);
}

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
  exec::CalibrationOptions options = o;
  options.devices = static_cast<std::size_t>(t.schedule.num_devices());
  const exec::Calibration c = exec::calibrate(t.exec, options);
  CostModel model = cost_model_from_calibration(c, describe(c, t), t.schedule.placement);
  if (links) {
    apply_process_links(model, links->pairs, links->nodes);
    model.description +=
        fmt::format("; links between the {} processes measured over MPI", links->nodes.size());
  }
  check_cost_model(model);
  if (!details_path.empty()) {
    ordered_json details = calibration_json(c);
    details["machine"] = machine_json();
    if (links) details["process_links"] = process_links_json(links->pairs, links->nodes);
    write_output(details_path, details.dump(2) + "\n");
  }
  write_output(output, write_cost_model(model));
  if (!f.quiet && output != "-")
    std::cerr << fmt::format("paci calibrate: wrote {} ({} stages)\n{}{}", output,
                             model.stages.size(), calibration_summary(c),
                             links ? process_links_summary(links->pairs) : "");
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
    // The costs do not depend on M; the schedule it places stages by must exist (interleaved
    // wants M a multiple of P).
    if (!given(vm, "microbatches")) f.microbatches = f.stages;
    return make_train_setup(f, vm);
  };
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
        const std::string text = process_links_json(links.pairs, links.nodes).dump(2) + "\n";
        write_output(details_path.empty() ? output : details_path, text);
        if (!f.quiet) std::cerr << process_links_summary(links.pairs);
      } else {
        unbind_from_cores("calibrate");
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
