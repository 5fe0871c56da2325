// paci train --device cuda: the same setup, outputs and report as the CPU path, with the schedule
// run by exec::gpu::GpuPipeline on the current GPU (every stage on its own stream). Under a
// launcher (mpirun, srun, or PACI_RANK/PACI_WORLD_SIZE), one process per schedule device: the
// ranks connect over NCCL (exec::gpu::NcclLinks), each runs its device, and the process running
// the last stage gathers the others' results and state and writes every output. Built only with
// the CUDA backend (PACI_HAVE_CUDA); the multi-process path only where NCCL is found
// (PACI_HAVE_NCCL).
#include <fmt/format.h>
#include <chrono>
#include <cstdlib>

#include "cli/common.hpp"
#include "cli/train_run.hpp"
#include "cli/train_setup.hpp"
#include "cuda/device.hpp"
#include "exec/cuda/pipeline.hpp"
#include "exec/cuda/trainer.hpp"
#include "exec/rank_plan.hpp"
#include "exec/rank_results.hpp"
#include "exec/remote.hpp"
#include "model/checkpoint_llmc.hpp"
#ifdef PACI_HAVE_NCCL
#include "cuda/nccl/communicator.hpp"
#include "exec/cuda/nccl_links.hpp"
#endif

namespace paci::cli {

namespace {

#ifdef PACI_HAVE_NCCL
// How long a process waits for the others to join (the rendezvous and NCCL's set-up).
constexpr std::chrono::seconds kJoinTimeout{300};

int run_train_processes(TrainSetup& t, const TrainFlags& f, const exec::LaunchInfo& info) {
  try {
    exec::check_launch(t.schedule, info.world_size);  // before waiting on anyone
  } catch (const InputError& e) {
    if (info.rank != 0) throw exec::QuietExit(e.what(), 2);  // process 0 says it
    throw;
  }
  const std::chrono::seconds timeout = exec::link_timeout();
  cuda::NcclCommunicator world =
      exec::gpu::connect_ranks(info, exec::rendezvous_endpoint_from_environment(), kJoinTimeout);
  exec::gpu::NcclLinks links(world, t.schedule, run_fingerprint(t, f), timeout);
  const bool writer = info.rank == exec::last_stage_device(t.schedule);
  return train_with<exec::gpu::GpuTrainer>(t, f, writer, &links);
}
#endif

}  // namespace

int run_train_gpu(TrainSetup& t, const TrainFlags& f, const exec::LaunchInfo& launch) {
  // Before the first CUDA call: load every kernel when the context is created. With CUDA 12+'s
  // lazy loading, the first launch of a backward, AdamW or cuBLAS kernel mid-run loads its module
  // and can wait behind NCCL transfers that wait on other processes. A user's own
  // setting is kept.
  ::setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  if (launch.world_size > 1) {
#ifdef PACI_HAVE_NCCL
    return run_train_processes(t, f, launch);
#else
    throw InputError(fmt::format(
        "started as process {} of {} by a launcher ({}), but this paci was built without NCCL, "
        "which one process per GPU needs (see docs/cuda.md)",
        launch.rank, launch.world_size, launch.source));
#endif
  }
  return train_with<exec::gpu::GpuTrainer>(t, f, true,
                                           static_cast<exec::gpu::RemoteLinks*>(nullptr));
}

}  // namespace paci::cli
