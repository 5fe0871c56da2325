// gpu_config: the GPU pipeline's configuration of a training run.
#include "exec/cuda/trainer.hpp"

#include "cuda/device.hpp"
#include "model/checkpoint_llmc.hpp"

namespace paci::exec::gpu {

GpuExecConfig gpu_config(const TrainSetup& t, const TrainOptions& f, RemoteLinks* remote) {
  GpuExecConfig g;
  static_cast<TrainingConfig&>(g) = t.exec;
  g.precision = cuda::parse_precision(f.precision);
  g.remote = remote;
  if (t.resume_state) {
    g.init_stage = [state = t.resume_state](std::int32_t, GpuStageRuntime& rt) {
      rt.copy_state_from(model::stage_state(*state, rt.layout().range()));
    };
  } else if (!t.init_path.empty()) {
    g.init_stage = [path = t.init_path](std::int32_t, GpuStageRuntime& rt) {
      rt.set_params(model::import_llmc(path, rt.layout()));
    };
  }
  return g;
}

}  // namespace paci::exec::gpu
