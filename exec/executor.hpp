// The pipeline executor: one worker per device (a thread, or all of them interleaved in one thread
// for a sequential replay) runs its device's IR list strictly in order; activations go forward
// and gradients backward through a Transport. Results depend only on each device's order and the
// data it receives, never on timing. Every action's start and end, the versions it read, and the
// memory in use are recorded into the same Timeline and report the simulator writes.
//
// One process per device: with ExecConfig::remote set (MPI links, exec/mpi/mpi_links.hpp), this
// process allocates and runs only the schedule device remote->local_device(), in the calling
// thread; every message goes through the links, and the result holds this device's part
// (exec::gather_result() merges the parts on the process running the last stage, where the
// losses are).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "exec/cut.hpp"
#include "exec/pipeline_core.hpp"
#include "exec/remote.hpp"
#include "exec/stage_plan.hpp"
#include "exec/stage_runtime.hpp"
#include "schedules/ir.hpp"
#include "traces/report.hpp"

namespace paci::exec {

// The CPU executor's configuration: the shared training configuration plus its threads.
struct ExecConfig : TrainingConfig {
  std::size_t threads_per_device = 1;
  bool sequential = false;  // replay every device in one thread instead of one thread each
  // Sets a stage's starting weights (and, to resume, its optimizer state); when unset, the
  // weights get the seeded GPT-2 initialisation.
  std::function<void(std::int32_t stage, StageRuntime& runtime)> init_stage;
  std::size_t transport_capacity = 1024;
  // One process per device: the links to the other processes (not owned; outlive the executor).
  HostLinks* remote = nullptr;
  // Consistent cuts (exec/cut.hpp) after the updates of every global step that is a multiple of
  // cut_every (steps counted from the start of training, like after_update), the run's last
  // excepted: on_cut gets each cut's image, with the optimizer steps done, on the thread of the
  // device that completes it while the others run on. A device reaching the next cut waits
  // until the previous one's on_cut has returned (one image buffer). One process only.
  std::int32_t cut_every = 0;
  std::function<void(const CutImage& image, std::size_t steps_done)> on_cut;
  // Resume at a cut of this same schedule: every device starts at its position with the
  // image's state restored (its stages' weights and AdamW state included; init_stage is not
  // called). InputError when the cut is not one of this schedule or the image does not fit.
  std::shared_ptr<const CutImage> resume_from;
};

class Executor : public Pipeline<StageRuntime, ExecConfig> {
 public:
  // Validates the schedule against the model (one range per stage; a split backward, I then W,
  // runs as StageRuntime::input_grad and weight_grad) and allocates every stage: nothing is
  // allocated once run() starts its steps.
  Executor(const Schedule& schedule, const ExecConfig& config);
  ~Executor();

  // Runs the whole schedule once. Throws InputError for a bad configuration and
  // std::runtime_error naming the stage and the action when a worker fails (every other worker
  // is stopped promptly).
  ExecResult run();

  // Mean loss of `count` micro-batches of `data` through every stage with the given weights
  // (one span per stage; empty for stages other processes run), forward only, in this thread.
  // Call when no run is in progress. One process per device: every process calls it
  // (activations go through the links) and the one running the last stage gets the loss; the
  // others get 0.
  double evaluate(const std::vector<std::span<const float>>& params, const DataFn& data,
                  std::uint64_t first, std::uint64_t count);

 private:
  class Run;
  struct CutRecorder;
  void restore(const CutImage& image);
  std::unique_ptr<CutRecorder> cuts_;  // with cut_every: the planned cuts and their buffers
};

}  // namespace paci::exec
