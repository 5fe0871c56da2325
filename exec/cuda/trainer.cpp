// gpu_config: the GPU pipeline's configuration of a training run.
#include "exec/cuda/trainer.hpp"

#include "cuda/device.hpp"

namespace paci::exec::gpu {

GpuExecConfig gpu_config(const TrainSetup& t, const TrainOptions& f, RemoteLinks* remote) {
  GpuExecConfig g;
  static_cast<TrainingConfig&>(g) = t.exec;
  g.precision = cuda::parse_precision(f.precision);
  g.remote = remote;
  g.init_stage = stage_initialiser<GpuStageRuntime>(t);
  return g;
}

}  // namespace paci::exec::gpu
