// paci train --device cuda: the same setup, outputs and report as the CPU path, with the schedule
// run by exec::gpu::GpuPipeline on the current GPU (every stage on its own stream). Built only
// with the CUDA backend (PACI_HAVE_CUDA).
#include <fmt/format.h>

#include "cli/common.hpp"
#include "cli/train_run.hpp"
#include "cli/train_setup.hpp"
#include "cuda/device.hpp"
#include "exec/cuda/pipeline.hpp"
#include "model/checkpoint_llmc.hpp"

namespace paci::cli {

namespace {

exec::gpu::GpuExecConfig gpu_config(const TrainSetup& t, const TrainFlags& f) {
  exec::gpu::GpuExecConfig g;
  static_cast<exec::TrainingConfig&>(g) = t.exec;
  g.precision = cuda::parse_precision(f.precision);
  if (t.resume_state) {
    g.init_stage = [state = t.resume_state](std::int32_t, exec::gpu::GpuStageRuntime& rt) {
      const model::StageState s = model::stage_state(*state, rt.layout().range());
      rt.set_params(s.weights);
      rt.set_optimizer_state(s.optimizer_steps, s.first_moment, s.second_moment);
    };
  } else if (!t.init_path.empty()) {
    g.init_stage = [path = t.init_path](std::int32_t, exec::gpu::GpuStageRuntime& rt) {
      rt.set_params(model::import_llmc(path, rt.layout()));
    };
  }
  return g;
}

// The GPU backend as train_run.hpp's Trainer.
class GpuTrainer {
 public:
  GpuTrainer(const TrainSetup& t, const TrainFlags& f)
      : t_(t), precision_(f.precision), pipeline_(t.schedule, gpu_config(t, f)) {}

  exec::ExecResult run() { return pipeline_.run(); }
  std::size_t snapshots() const { return pipeline_.stage(0).snapshots(); }
  double validate(std::optional<std::size_t> snapshot, const exec::DataFn& val,
                  std::uint64_t count) {
    std::vector<cuda::TensorView> weights;
    for (std::int32_t s = 0; s < t_.schedule.stages; ++s)
      weights.push_back(snapshot ? pipeline_.stage(s).snapshot(*snapshot)
                                 : pipeline_.stage(s).weights());
    return pipeline_.evaluate(weights, val, 0, count);
  }
  RunSummary summary(const exec::ExecResult& r) const { return pipeline_.summary(r); }
  std::vector<model::StageStateView> state_views() {
    host_.clear();
    for (std::int32_t s = 0; s < t_.schedule.stages; ++s) {
      const exec::gpu::GpuStageRuntime& rt = pipeline_.stage(s);
      host_.push_back({rt.layout().range(), rt.optimizer_steps(), rt.params(), rt.first_moment(),
                       rt.second_moment()});
    }
    std::vector<model::StageStateView> views;
    for (const auto& h : host_) views.push_back(h.view());
    return views;
  }
  std::vector<float> whole_params() {
    std::vector<float> params;
    for (std::int32_t s = 0; s < t_.schedule.stages; ++s) {
      const auto p = pipeline_.stage(s).params();
      params.insert(params.end(), p.begin(), p.end());
    }
    return params;
  }
  void describe(ordered_json& keys) const {
    keys["device"] = cuda::device_description();
    keys["precision"] = precision_;
  }

 private:
  const TrainSetup& t_;
  std::string precision_;
  exec::gpu::GpuPipeline pipeline_;
  std::vector<model::StageState> host_;  // state_views() storage
};

}  // namespace

int run_train_gpu(TrainSetup& t, const TrainFlags& f) {
  return train_with<GpuTrainer>(t, f);
}

}  // namespace paci::cli
