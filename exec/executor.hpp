// The pipeline executor: one worker per device (a thread, or all of them interleaved in one thread
// for a sequential replay) runs its device's IR list strictly in order; activations go forward
// and gradients backward through a Transport. Results depend only on each device's order and the
// data it receives, never on timing. Every action's start and end, the versions it read, and the
// memory in use are recorded into the same Timeline and report the simulator writes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "exec/stage_plan.hpp"
#include "exec/stage_runtime.hpp"
#include "schedules/analysis.hpp"
#include "schedules/ir.hpp"
#include "traces/report.hpp"
#include "traces/timeline.hpp"

namespace paci::exec {

// The CPU executor's configuration: the shared training configuration plus its threads.
struct ExecConfig : TrainingConfig {
  std::size_t threads_per_device = 1;
  bool sequential = false;  // replay every device in one thread instead of one thread each
  // Sets a stage's starting weights (and, to resume, its optimizer state); when unset, the
  // weights get the seeded GPT-2 initialisation.
  std::function<void(std::int32_t stage, StageRuntime& runtime)> init_stage;
  std::size_t transport_capacity = 1024;
};

class Executor {
 public:
  // Validates the schedule against the model (one range per stage, no split backward yet) and
  // allocates every stage: nothing is allocated once run() starts its steps.
  Executor(const Schedule& schedule, const ExecConfig& config);
  ~Executor();

  // Runs the whole schedule once. Throws InputError for a bad configuration and
  // std::runtime_error naming the stage and the action when a worker fails (every other worker
  // is stopped promptly).
  ExecResult run();

  // Stage runtimes after run(): final weights, optimizer state.
  const StageRuntime& stage(std::int32_t s) const { return *stages_[static_cast<std::size_t>(s)]; }
  StageRuntime& stage(std::int32_t s) { return *stages_[static_cast<std::size_t>(s)]; }

  // Mean loss of `count` micro-batches of `data` through every stage with the given weights
  // (one span per stage), forward only, in this thread. Call when no run is in progress.
  double evaluate(const std::vector<std::span<const float>>& params, const DataFn& data,
                  std::uint64_t first, std::uint64_t count);

  RunSummary summary(const ExecResult& result) const;

 private:
  class Device;
  const Schedule& schedule_;
  ExecConfig config_;
  Analysis analysis_;
  std::vector<std::unique_ptr<StageRuntime>> stages_;
};

}  // namespace paci::exec
