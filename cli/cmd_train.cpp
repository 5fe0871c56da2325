// paci train — trains the GPT on a schedule (generated, or a file) with the pipeline executor: on
// the CPU (one worker thread per device, or a sequential replay; under mpirun, one process per
// device over MPI) or, with --device cuda, on GPUs (cli/gpu/train_gpu.cpp). Both write the shared
// report and trace, metrics JSONL, checkpoints.
#include <fmt/format.h>
#include <iostream>
#include <optional>

#include "cli/cli.hpp"
#include "cli/common.hpp"
#include "cli/train_run.hpp"
#include "cli/train_setup.hpp"
#include "exec/executor.hpp"
#include "exec/rank_plan.hpp"
#include "exec/rank_results.hpp"
#include "exec/remote.hpp"
#include "exec/trainer.hpp"
#ifdef PACI_HAVE_MPI
#include "cli/mpi_launch.hpp"
#include "exec/mpi/mpi_links.hpp"
#endif

namespace paci::cli {

namespace {

// One process per device on CPUs: MPI first (so that the processes can agree on their setup),
// the links, then the same run and outputs as one process, the writer being the process running
// the last stage. A failure is printed here, before MPI is finalised (which waits for every
// process), and the process ends quietly after that.
int run_train_processes(TrainFlags& f, const po::variables_map& vm,
                        const exec::LaunchInfo& launch) {
#ifdef PACI_HAVE_MPI
  exec::mpi::Session session;
  f.processes_here = static_cast<std::size_t>(session.local_size());  // collective
  std::chrono::seconds timeout{};
  TrainSetup t = agreed_setup(session, "train", [&] {
    check_mpi_sees(launch, session.size(), "train --device cpu");
    if (f.sequential)
      throw InputError("--sequential replays every device in one process, not one per process");
    if (f.save_every > 0)
      throw UsageError(
          "--save-every saves from one process; one process per device saves at the end (--save)");
    TrainSetup setup = make_train_setup(f, vm);
    if (setup.exec.resume_from)
      throw UsageError(fmt::format(
          "{} is a cut of a running pipeline (paci train --save-every); one process per device "
          "cannot resume one yet: resume it in one process (without mpirun)",
          f.resume_path));
    // Before waiting on anyone; MpiLinks keeps a message that arrives ahead of its turn.
    exec::check_launch(setup.schedule, session.size(), false, f.ep);
    timeout = exec::link_timeout();
    return setup;
  });
  if (!f.quiet && session.rank() == 0)
    for (const auto& note : t.notes) std::cerr << "paci train: note: " << note << '\n';
  std::optional<exec::mpi::MpiLinks> links;
  try {
    links.emplace(t.schedule, run_fingerprint(t, f), timeout, f.ep);
    // The last stage's process of expert part 0 (every part runs the same schedule).
    const bool writer = links->local_device() == exec::last_stage_device(t.schedule) &&
                        links->expert_shard().index == 0;
    return train_with<exec::CpuTrainer>(t, f, writer, static_cast<exec::HostLinks*>(&*links));
  } catch (...) {
    end_launch("train", links ? &*links : nullptr);
  }
#else
  (void)f;
  (void)vm;
  refuse_without_mpi(launch, "one process per device on CPUs");
#endif
}

}  // namespace

int run_train(const std::vector<std::string>& args) {
  TrainFlags f;
  po::options_description options("options");
  add_train_options(options, f);
  po::variables_map vm;
  const exec::LaunchInfo launch = launch_info();
  if (!only_process_zero_says(launch, "train", [&] {
        return parse_options(
            "train",
            "(--kind K --stages P --microbatches M --steps N | --schedule FILE) "
            "[model, data, optimizer flags] [--device cpu|cuda] [--report R] [--trace T]",
            options, {}, args, vm);
      }))
    return 0;
  if (launch.world_size > 1 && f.device == "cpu") return run_train_processes(f, vm, launch);
  TrainSetup t = only_process_zero_says(launch, "train", [&] { return make_train_setup(f, vm); });
  if (f.ep > 1)
    throw UsageError(fmt::format(
        "--ep {} runs each device's expert parts as processes: start {} of them with mpirun (-np "
        "{})",
        f.ep, t.schedule.num_devices() * f.ep, t.schedule.num_devices() * f.ep));
  if (!f.quiet && launch.rank == 0)
    for (const auto& note : t.notes) std::cerr << "paci train: note: " << note << '\n';
  if (f.device == "cuda") return run_train_gpu(t, f, launch);
  return train_with<exec::CpuTrainer>(t, f, true);
}

}  // namespace paci::cli
