// What both executors (the CPU one in exec/executor.hpp and the GPU pipeline in exec/cuda/) share:
// the training configuration of a run, the per-stage plan derived from it and from the schedule's
// static analysis (shape, weight policy, activation slots and weight copies to allocate, optimizer,
// LR schedule, loss scale), the checks that a schedule can run, and the analysis of what a run
// observed (the versions really read, the measured peaks).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "exec/version_book.hpp"
#include "model/gpt.hpp"
#include "schedules/analysis.hpp"
#include "schedules/ir.hpp"
#include "traces/report.hpp"
#include "traces/timeline.hpp"

namespace paci::exec {

class StageRuntime;  // exec/stage_runtime.hpp

// Fills the B·T input tokens and targets of micro-batch `index` (a pure function of the index).
using DataFn = std::function<void(std::uint64_t index, std::span<std::int32_t> inputs,
                                  std::span<std::int32_t> targets)>;

struct StepLoss {
  std::int32_t step = 0;  // optimizer step of the micro-batches (mb / M)
  double loss = 0.0;      // mean of their forward losses
  double time_s = 0.0;    // when the last of them finished its forward (GPU: when it was seen)
  std::int64_t microbatches_done = 0;
  // False where this process ran one copy's half of the step's last-stage forwards (two copies,
  // one process per device): the loss is not known here (NaN), only that the step's half ran.
  bool whole = true;
};

// A run's training configuration, whatever backend executes it.
struct TrainingConfig {
  model::GptConfig config;
  std::vector<model::StageRange> ranges;  // one per stage
  std::size_t batch = 1, seq_len = 1;     // B, T
  model::AdamWConfig adamw;
  model::LrSchedule lr;  // total_steps: at least first_step + the schedule's N
  double clip = 0.0;
  std::uint64_t seed = 1;  // initialisation (model::init_gpt2) when no init_stage is given
  bool record_timeline = true;
  DataFn data;
  std::function<void(const StepLoss&)> on_step;  // in step order
  std::size_t first_step = 0;                    // optimizer steps done before this run (resume)
  std::int32_t snapshot_every = 0;  // keep weights after every k-th update for validation
  std::optional<Action> fail_at;    // failure injection (tests): throw when about to run it
  bool fail_kills = false;          // ... or end the process with SIGKILL there (crash tests)
  // Called on the stage's worker right after each of its updates, with the optimizer steps it has
  // done since the start of training (resumed runs included), outside the action's measured
  // time: periodic checkpoints (paci train --save-every). An exception fails the run like a
  // failing action. CPU executor only.
  std::function<void(const StageRuntime& stage, std::size_t steps_done)> after_update;
};

// One stage's part of a run.
struct StagePlan {
  model::StageShape shape;
  std::int32_t stage = 0;
  WeightPolicy policy = WeightPolicy::current;
  std::size_t activation_capacity = 1;  // slots: the analysed peak activations of the stage
  bool split_backward = false;          // the stage's backward is I, then W (zero bubble)
  std::size_t stash_capacity = 0;       // extra weight copies: analysed peak versions - 1
  model::AdamWConfig adamw;
  model::LrSchedule lr;
  double clip = 0.0;        // > 0: clip this stage's gradient norm to it before each update
  float loss_scale = 1.0f;  // 1/M: the last stage's loss is averaged over a step's micro-batches
  std::int64_t total_microbatches = 0;
  std::int32_t updates = 0;         // U actions of the stage in the schedule (N)
  std::size_t lr_step_offset = 0;   // optimizer steps done before this run (resume)
  std::int32_t snapshot_every = 0;  // > 0: keep a copy of the weights after every k-th update

  // Weight copies kept for validation: the multiples of snapshot_every among the global steps
  // (lr_step_offset, lr_step_offset + updates]; and whether the update of global step `step`
  // (0-based) is one of them.
  std::size_t snapshot_count() const;
  bool snapshot_after(std::size_t step) const;
};

// Throws InputError when `schedule` cannot run on an executor (either backend): invalid, or a
// partition with another number of stages; std::invalid_argument without a data function.
void check_runnable(const Schedule& schedule, const TrainingConfig& config);

// The plan of every stage; config.lr.total_steps is raised to cover the schedule's steps.
std::vector<StagePlan> plan_stages(const Schedule& schedule, const Analysis& analysis,
                                   const TrainingConfig& config);

// The mean loss of step k's M micro-batches, from every micro-batch's loss in order.
template <typename T>
double step_mean(std::span<const T> losses, std::int32_t microbatches, std::int32_t k) {
  double sum = 0.0;
  for (std::int32_t i = k * microbatches; i < (k + 1) * microbatches; ++i)
    sum += losses[static_cast<std::size_t>(i)];
  return sum / microbatches;
}

// What a run measured, whatever backend ran it.
struct ExecResult {
  std::vector<double> step_losses;       // per optimizer step: mean loss of its micro-batches
  std::vector<float> microbatch_losses;  // per micro-batch, as its forward computed it
  // A mixture of experts: per stage, each micro-batch's load-balancing loss on its blocks (empty
  // for a dense model); step_aux_losses() sums the stages' step means.
  std::vector<std::vector<float>> stage_aux_losses;
  // And per stage, the tokens each expert of each block was chosen by (blocks × E).
  std::vector<std::vector<std::int64_t>> stage_expert_tokens;
  std::vector<double> step_aux_losses(std::int32_t microbatches) const;
  ActionTimes times;  // aligned with schedule.devices
  Timeline timeline;  // source "measured"
  Analysis observed;  // versions really read; measured peaks
  std::vector<std::int64_t> device_peak_memory_bytes;
  double wall_s = 0.0;
  std::int64_t peak_messages_in_flight = 0;  // sent, not yet received (between this process's
                                             // devices), at most at once: <= message_bound()
                                             // of the lowered program (schedules/lower.hpp)
  // GPU: message buffers allocated before the run (message_bound()) and during it (when every
  // free one was still being read on the GPU); 0 and 0 on the CPU.
  std::int64_t message_buffers_preallocated = 0, message_buffers_grown = 0;
};

// The measured run in the report's terms (timing from result.times, observed versions, peaks).
RunSummary measured_summary(const Schedule& schedule, const ExecResult& result,
                            const TrainingConfig& config);

// What a stage's run recorded, for observed_analysis.
struct StageObservation {
  const VersionBook* versions = nullptr;
  std::size_t peak_activations = 0;
  std::span<const float> aux_losses;            // StageBooks::aux_losses
  std::span<const std::int64_t> expert_tokens;  // StageBooks::expert_tokens
};
// The analysis of a finished run: versions really read, measured peaks, staleness summaries.
// A stage without a VersionBook (run by another process) is left out, and then so are the
// summaries: merge_rank_results() (exec/rank_results.hpp) completes them.
Analysis observed_analysis(const Schedule& schedule, std::span<const StageObservation> stages);

}  // namespace paci::exec
