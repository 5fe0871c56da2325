// paci train's options resolved into what a run needs: the schedule (generated, a file, or the
// one a cut checkpoint carries), the model's shape (options, an llm.c model file, or a training
// state to resume), the data, the optimizer and LR schedule, and the executor's configuration.
// Every bad combination is an InputError (UsageError where the options alone are wrong) with one
// line naming it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "exec/executor.hpp"
#include "model/checkpoint_llmc.hpp"
#include "model/checkpoint_state.hpp"
#include "model/data.hpp"

namespace paci::exec {

struct TrainOptions {
  std::string kind = "paci", schedule_path, partition;
  std::int32_t stages = 1, microbatches = 1, steps = 1, stop_after = 0, chunks = 0, save_every = 0;
  std::int32_t ep = 1;  // processes per device, each holding 1/ep of its experts (mpirun)
  // Processes of a launch on this machine, each running one device (0: one process, every device
  // a thread): --threads auto divides the cores among them.
  std::size_t processes_here = 0;
  std::size_t layers = 4, heads = 4, d_model = 128, seq_len = 128, vocab = 256, batch = 16;
  // Mixture of experts (model/config.hpp, MoeConfig): experts 0 is dense; expert_hidden 0 is the
  // width that gives the top_k experts (and the shared one) the dense MLP's 8·C² FLOPs a token.
  std::size_t experts = 0, top_k = 2, expert_hidden = 0;
  bool shared_expert = false;
  double capacity_factor = 0, aux_loss_coef = 0.01;
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
  // The flags the user gave (names without "--"): a checkpoint's shape yields only to those, and
  // some combinations are refused only when given.
  std::set<std::string> given;
  bool was_given(const std::string& flag) const { return given.count(flag) > 0; }
};

struct TrainSetup {
  Schedule schedule;  // what this run executes (the remaining steps when resuming)
  // The schedule file this run executes (--schedule, or the copy a cut of such a run carries);
  // empty for --kind. Periodic saves of such a run are cuts carrying the schedule.
  std::string schedule_file;
  ExecConfig exec;
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

TrainSetup make_train_setup(const TrainOptions& options);

// How the stages of a run start, on either backend (Runtime: StageRuntime or GpuStageRuntime):
// from the training state resumed, from the llm.c model file, or (empty: the seeded GPT-2
// initialisation) from neither.
template <typename Runtime>
std::function<void(std::int32_t, Runtime&)> stage_initialiser(const TrainSetup& t) {
  if (t.resume_state)
    return [state = t.resume_state](std::int32_t, Runtime& rt) {
      rt.copy_state_from(model::stage_state(*state, rt.layout().range()));
    };
  if (!t.init_path.empty())
    return [path = t.init_path](std::int32_t, Runtime& rt) {
      rt.set_params(model::import_llmc(path, rt.layout()));
    };
  return {};
}

}  // namespace paci::exec
