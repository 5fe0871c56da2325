// A training run's backends behind one interface, so that paci train's outputs (cli/train_run.hpp)
// do not depend on where the schedule runs. A Trainer is constructed as
// Trainer(const TrainSetup&, const TrainOptions&, extra...) and has
//   ExecResult run();
//   std::size_t snapshots() const;                 // weight copies kept every --val-every steps
//   double validate(std::optional<std::size_t> snapshot, const DataFn& val,
//                   std::uint64_t count);         // nullopt: the final weights
//   RunSummary summary(const ExecResult&) const;
//   std::vector<model::StageStateView> state_views();  // valid until the next call
//   std::vector<float> whole_params();
//   void describe(ordered_json& report_head) const;  // backend keys of the report
// With remote links, a Trainer is one process of a multi-process launch and every method is
// collective: all processes call them in the same order. CpuTrainer runs the CPU executor;
// exec/cuda/trainer.hpp's GpuTrainer the GPU pipeline.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "exec/executor.hpp"
#include "exec/rank_results.hpp"
#include "exec/remote.hpp"
#include "exec/train_setup.hpp"
#include "model/checkpoint_state.hpp"
#include "traces/report.hpp"

namespace paci::exec {

// Every stage's weights in stage order: with `remote` (one process per device), from the states
// `trainer.state_views()` gathers; else the host copies of the stages of `pipeline` (an Executor
// or a GpuPipeline), all of them here.
template <typename Trainer, typename Pipeline>
std::vector<float> whole_params_of(Trainer& trainer, bool remote, std::int32_t stages,
                                   const Pipeline& pipeline) {
  std::vector<float> params;
  if (remote) {
    for (const model::StageStateView& v : trainer.state_views())
      params.insert(params.end(), v.weights.begin(), v.weights.end());
    return params;
  }
  for (std::int32_t s = 0; s < stages; ++s) {
    const std::vector<float> p = pipeline.stage(s).params();
    params.insert(params.end(), p.begin(), p.end());
  }
  return params;
}

// The CPU executor as a Trainer; with `remote`, one process of a multi-process
// launch (every method is then collective: all processes call them in the same order).
class CpuTrainer {
 public:
  CpuTrainer(const TrainSetup& t, const TrainOptions&, HostLinks* remote = nullptr)
      : t_(t), remote_(remote), ex_(t.schedule, with_links(t.exec, remote)) {}

  ExecResult run() {
    ExecResult local = ex_.run();
    return remote_ ? gather_result(*remote_, t_.schedule, local) : local;
  }
  std::size_t snapshots() const { return ex_.stage(ex_.first_local_stage()).snapshots(); }
  double validate(std::optional<std::size_t> snapshot, const DataFn& val, std::uint64_t count) {
    return ex_.evaluate(ex_.weights_of(snapshot), val, 0, count);
  }
  RunSummary summary(const ExecResult& r) const { return ex_.summary(r); }
  std::vector<model::StageStateView> state_views() {
    std::vector<model::StageStateView> views;
    // Two copies hold the same weights and moments: the first copy's stages are the model.
    for (std::int32_t s = 0; s < t_.schedule.stages_per_copy(); ++s) {
      if (!ex_.runs(s)) continue;
      const StageRuntime& rt = ex_.stage(s);
      views.push_back({rt.layout().range(), rt.optimizer().steps(), rt.weights(),
                       rt.optimizer().first_moment(), rt.optimizer().second_moment()});
    }
    if (!remote_) return views;
    if (!remote_->expert_shard().whole()) {  // whole stages on part 0, whose processes write
      assembled_ = assemble_expert_parts(*remote_, t_.exec.config, views);
      if (remote_->expert_shard().index != 0) return {};
      views.clear();
      for (const auto& a : assembled_) views.push_back(a.view());
    }
    gathered_ = gather_stage_states(*remote_, t_.schedule, views);  // on the writer
    views.clear();
    for (const auto& g : gathered_) views.push_back(g.view());
    return views;
  }
  std::vector<float> whole_params() {
    return whole_params_of(*this, remote_ != nullptr, t_.schedule.stages_per_copy(), ex_);
  }
  void describe(ordered_json& keys) const {
    keys["device"] = "cpu";
    keys["threads_per_device"] = t_.exec.threads_per_device;
    if (remote_) {
      const std::int32_t parts = static_cast<std::int32_t>(remote_->expert_shard().count);
      keys["processes"] = t_.schedule.num_devices() * parts;
      if (parts > 1) keys["expert_parallel"] = parts;
    }
  }

 private:
  static ExecConfig with_links(ExecConfig c, HostLinks* remote) {
    c.remote = remote;
    return c;
  }

  const TrainSetup& t_;
  HostLinks* remote_;
  Executor ex_;
  std::vector<model::StageState> gathered_;   // state_views() storage, one process per device
  std::vector<model::StageState> assembled_;  // whole stages from every expert part
};

}  // namespace paci::exec
