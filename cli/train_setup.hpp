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
#include "exec/launch.hpp"
#include "exec/remote.hpp"
#include "model/checkpoint_state.hpp"
#include "model/data.hpp"

namespace paci::cli {

struct TrainFlags {
  std::string kind = "paci", schedule_path, partition;
  std::int32_t stages = 1, microbatches = 1, steps = 1, stop_after = 0, chunks = 0, save_every = 0;
  std::size_t layers = 4, heads = 4, d_model = 128, seq_len = 128, vocab = 256, batch = 16;
  double lr = 1e-3, min_lr = -1, weight_decay = 0.1, beta1 = 0.9, beta2 = 0.95, eps = 1e-8,
         clip = 0.0;
  std::int64_t warmup_steps = -1;
  std::string lr_decay = "cosine";
  std::uint64_t seed = 1;
  std::size_t threads = 0;
  std::string device = "cpu", precision = "fp32";
  std::string data = "data/kjv_train.bin", val_data = "data/kjv_val.bin", data_order = "shuffled";
  std::int32_t val_every = 0;
  std::size_t val_microbatches = 16;
  std::string init_path, save_path, resume_path, export_path, metrics_path, report_path, trace_path,
      fail_at, kill_at;
  bool quiet = false, sequential = false;
};

void add_train_options(po::options_description& options, TrainFlags& flags);

struct TrainSetup {
  Schedule schedule;  // what this run executes (the remaining steps when resuming)
  // The schedule file this run executes (--schedule, or the copy a cut of such a run carries);
  // empty for --kind. Periodic saves of such a run are cuts carrying the schedule.
  std::string schedule_file;
  exec::ExecConfig exec;
  std::size_t first_step = 0;        // optimizer steps done before this run's schedule starts
  std::size_t start_step = 0;        // where this run takes over: first_step, or a cut's step
  std::size_t first_microbatch = 0;  // global index of this run's first micro-batch (resume)
  std::size_t last_step = 0;         // steps done after it: first_step + schedule.steps
  std::size_t total_steps = 0;       // --steps: the length of the whole training (LR schedule)
  std::shared_ptr<model::TokenData> train, val;  // val may be empty
  std::uint64_t data_seed = 0;
  model::DataOrder data_order = model::DataOrder::shuffled;
  // Where the starting weights come from (exec.init_stage applies them on the CPU; the GPU
  // backend reads them from here): a training state to resume, or an llm.c model file.
  std::shared_ptr<const model::TrainingState> resume_state;
  std::string init_path;
  std::vector<std::string> notes;  // for the user, once on stderr (unless --quiet)
};

// Throws UsageError / InputError with one clear line for every bad combination.
TrainSetup make_train_setup(const TrainFlags& flags, const po::variables_map& vm);

// Where this process sits in a launch (exec/launch.hpp); a malformed launcher variable is an
// InputError.
exec::LaunchInfo launch_info();

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

// Under a launcher, in a paci built without MPI: the error naming the launch and what needs MPI.
// Process 0 throws it; the others end quietly with the same exit status (2).
[[noreturn]] void refuse_without_mpi(const exec::LaunchInfo& launch, const std::string& needs);
// Under a launcher, with MPI: throws InputError unless MPI sees the launcher's processes (the
// launcher's variables without mpirun give every process a world of one).
void check_mpi_sees(const exec::LaunchInfo& launch, int mpi_processes, const std::string& command);
// One process per device: an InputError unless the launch has `devices` processes.
void check_one_process_per_device(int processes, std::int32_t devices);

// One process per device: what every process of a launch must agree on, whatever the transport —
// the schedule and each setting that shapes a message or the data (sizes, precision, the
// partition, seeds, the data position), decides the collective calls after the run (validation,
// --save, --export-llmc) or the numbers (optimizer, LR schedule).
std::uint64_t run_fingerprint(const TrainSetup& t, const TrainFlags& flags);

// paci train on the GPU (cli/gpu/train_gpu.cpp): on the current one, or, when `launch` has more
// than one process, one process per schedule device over NCCL. Where paci was built without the
// CUDA backend (or, for a launch, without NCCL), an InputError saying so.
int run_train_gpu(TrainSetup& t, const TrainFlags& flags, const exec::LaunchInfo& launch);

}  // namespace paci::cli
