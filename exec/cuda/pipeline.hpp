// GpuPipeline: the GPU backend of the pipeline core (exec/pipeline_core.hpp). Every stage is a
// GpuStageRuntime with its own CUDA stream; one host thread walks the devices' lowered programs
// round-robin and queues each action on its stage's stream as soon as the actions it depends on
// have been queued (their completion is ordered on the GPU by CUDA events, not by host waits).
// Activations and gradients move between stages through the device-local transport in
// pipeline.cpp: a copy into a pooled device buffer on the producer's stream, an event the
// consumer's stream waits for. Start and end of every action and message are
// CUDA events, turned into the same ExecResult (Timeline, ActionTimes, versions read, peak memory)
// the CPU executor writes, so `paci train --device cuda` reports in the shared schema.
//
// Results depend only on each device's order, like the CPU executor: the same file and seed give
// the same numbers on the same GPU. Several schedule devices may share the GPU (one stream per
// stage); actions of one schedule device stay in order even when they belong to several stages.
//
// One process per GPU: with GpuExecConfig::remote set, this process runs only the schedule
// device remote->local_device() (its stages alone are allocated); a message to or from another
// device goes through RemoteLinks (NCCL), queued in the order exec::device_links() checked. The
// result then holds this device's part (exec/rank_results.hpp merges the parts), and the losses
// are known on the process that runs the last stage.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "cuda/precision.hpp"
#include "exec/cuda/gpu_stage.hpp"
#include "exec/cuda/remote.hpp"
#include "exec/pipeline_core.hpp"
#include "exec/stage_plan.hpp"
#include "schedules/ir.hpp"
#include "traces/report.hpp"

namespace paci::exec::gpu {

// The GPU pipeline's configuration: the shared training configuration plus the precision.
struct GpuExecConfig : TrainingConfig {
  cuda::Precision precision = cuda::Precision::fp32;
  // Sets a stage's starting weights (and optimizer state, to resume); when unset, the weights
  // get the seeded GPT-2 initialisation.
  std::function<void(std::int32_t stage, GpuStageRuntime& runtime)> init_stage;
  // One process per device: the links to the other processes (not owned; outlives the pipeline).
  RemoteLinks* remote = nullptr;
};

class GpuPipeline : public Pipeline<GpuStageRuntime, GpuExecConfig> {
 public:
  // Validates the schedule against the model, picks the current CUDA device (throws
  // cuda::CudaError when there is none) and allocates every stage.
  GpuPipeline(const Schedule& schedule, const GpuExecConfig& config);
  ~GpuPipeline();

  // Runs the whole schedule once; waits for the GPU before returning. Throws InputError for a
  // bad configuration and std::runtime_error naming the stage and action on a failure.
  ExecResult run();

  // Mean loss of `count` micro-batches of `data` through every stage with the given weights (one
  // device view per stage: weights() or a snapshot; empty for stages other processes run),
  // forward only. Call when no run is in progress. One process per device: every process calls
  // it (activations go through the links) and the one running the last stage gets the loss; the
  // others get 0.
  double evaluate(const std::vector<cuda::TensorView>& weights, const DataFn& data,
                  std::uint64_t first, std::uint64_t count);

 private:
  class Run;
};

}  // namespace paci::exec::gpu
