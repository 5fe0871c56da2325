// paci train's GPU backend (exec/trainer.hpp's Trainer): the schedule run by GpuPipeline on the
// current GPU, every stage on its own stream; with remote links, one process per schedule device.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cuda/device.hpp"
#include "exec/cuda/pipeline.hpp"
#include "exec/rank_results.hpp"
#include "exec/train_setup.hpp"
#include "exec/trainer.hpp"
#include "model/checkpoint_state.hpp"
#include "traces/report.hpp"

namespace paci::exec::gpu {

// The pipeline's configuration for a run: the training setup, the precision, the links to the
// other processes (null: one process), the starting weights of a resumed run or an llm.c file.
GpuExecConfig gpu_config(const TrainSetup& t, const TrainOptions& options, RemoteLinks* remote);

// The GPU pipeline as a Trainer (exec/trainer.hpp); with `remote`, one process of a multi-process
// launch (every method is then collective: all processes call them in the same order).
class GpuTrainer {
 public:
  GpuTrainer(const TrainSetup& t, const TrainOptions& f, RemoteLinks* remote)
      : t_(t),
        precision_(f.precision),
        remote_(remote),
        pipeline_(t.schedule, gpu_config(t, f, remote)) {}

  ExecResult run() {
    ExecResult local = pipeline_.run();
    return remote_ ? gather_result(*remote_, t_.schedule, local) : local;
  }
  std::size_t snapshots() const {
    return pipeline_.stage(pipeline_.first_local_stage()).snapshots();
  }
  double validate(std::optional<std::size_t> snapshot, const DataFn& val, std::uint64_t count) {
    return pipeline_.evaluate(pipeline_.weights_of(snapshot), val, 0, count);
  }
  RunSummary summary(const ExecResult& r) const { return pipeline_.summary(r); }
  std::vector<model::StageStateView> state_views() {
    host_.clear();
    for (std::int32_t s = 0; s < t_.schedule.stages; ++s) {
      if (!pipeline_.runs(s)) continue;
      const GpuStageRuntime& rt = pipeline_.stage(s);
      const std::size_t n = rt.layout().size();
      model::StageState& state = host_.emplace_back();
      state.range = rt.layout().range();
      for (auto* v : {&state.weights, &state.first_moment, &state.second_moment}) v->resize(n);
      rt.copy_state_to(state);
    }
    if (remote_) {  // every process's stages, on the writer
      std::vector<model::StageStateView> mine;
      for (const auto& h : host_) mine.push_back(h.view());
      host_ = gather_stage_states(*remote_, t_.schedule, mine);
    }
    std::vector<model::StageStateView> views;
    for (const auto& h : host_) views.push_back(h.view());
    return views;
  }
  std::vector<float> whole_params() {
    return whole_params_of(*this, remote_ != nullptr, t_.schedule.stages, pipeline_);
  }
  void describe(ordered_json& keys) const {
    keys["device"] = cuda::device_description();
    keys["precision"] = precision_;
    if (remote_) keys["processes"] = t_.schedule.num_devices();
  }

 private:
  const TrainSetup& t_;
  std::string precision_;
  RemoteLinks* remote_;
  GpuPipeline pipeline_;
  std::vector<model::StageState> host_;  // state_views() storage
};

}  // namespace paci::exec::gpu
