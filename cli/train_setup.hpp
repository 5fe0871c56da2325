// paci train's flags and their resolution into a schedule, a model shape, data and an executor
// configuration (from flags, an llm.c model file, or a training-state checkpoint to resume).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/cli.hpp"
#include "cli/common.hpp"
#include "exec/executor.hpp"
#include "exec/fingerprint.hpp"
#include "exec/launch.hpp"
#include "exec/launch_checks.hpp"
#include "exec/remote.hpp"
#include "exec/train_setup.hpp"

namespace paci::cli {

using TrainFlags = exec::TrainOptions;
using exec::TrainSetup;

void add_train_options(po::options_description& options, TrainFlags& flags);

// exec::make_train_setup with the flags `vm` says were given.
TrainSetup make_train_setup(TrainFlags flags, const po::variables_map& vm);
using exec::run_fingerprint;

using exec::check_mpi_sees;
using exec::check_one_process_per_device;
using exec::launch_info;
using exec::refuse_without_mpi;

// Runs `setup` (what every process of a launch checks alike, before they meet); where it fails,
// process 0 prints the one line and the others end with the same exit code, quietly.
template <typename Setup>
auto only_process_zero_says(const exec::LaunchInfo& launch, const std::string& command,
                            Setup&& setup) {
  try {
    return setup();
  } catch (...) {
    if (launch.world_size == 1 || launch.rank == 0) throw;
    throw exec::QuietExit("reported by process 0",
                          report_failure(command, std::current_exception(), false));
  }
}

// paci train on the GPU (cli/gpu/train_gpu.cpp): on the current one, or, when `launch` has more
// than one process, one process per schedule device over NCCL. Where paci was built without the
// CUDA backend (or, for a launch, without NCCL), an InputError saying so.
int run_train_gpu(TrainSetup& t, const TrainFlags& flags, const exec::LaunchInfo& launch);

}  // namespace paci::cli
