// paci train --device cuda: the same setup, outputs and report as the CPU path, with the schedule
// run by exec::gpu::GpuPipeline on the current GPU (every stage on its own stream). Under a
// launcher (mpirun, srun, or PACI_RANK/PACI_WORLD_SIZE), one process per schedule device: the
// ranks connect over NCCL (exec::gpu::NcclLinks), each runs its device, and the process running
// the last stage gathers the others' results and state and writes every output. Built only with
// the CUDA backend (PACI_HAVE_CUDA); the multi-process path only where NCCL is found
// (PACI_HAVE_NCCL).
#include <fmt/format.h>
#include <chrono>
#include <cstdlib>

#include "cli/common.hpp"
#include "cli/train_run.hpp"
#include "cli/train_setup.hpp"
#include "cuda/device.hpp"
#include "exec/cuda/pipeline.hpp"
#include "exec/rank_plan.hpp"
#include "exec/rank_results.hpp"
#include "exec/remote.hpp"
#include "model/checkpoint_llmc.hpp"
#ifdef PACI_HAVE_NCCL
#include "cuda/nccl/communicator.hpp"
#include "exec/cuda/nccl_links.hpp"
#endif

namespace paci::cli {

namespace {

exec::gpu::GpuExecConfig gpu_config(const TrainSetup& t, const TrainFlags& f,
                                    exec::gpu::RemoteLinks* remote) {
  exec::gpu::GpuExecConfig g;
  static_cast<exec::TrainingConfig&>(g) = t.exec;
  g.precision = cuda::parse_precision(f.precision);
  g.remote = remote;
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

// The GPU backend as train_run.hpp's Trainer; with `remote`, one process of a multi-process
// launch (every method is then collective: all processes call them in the same order).
class GpuTrainer {
 public:
  GpuTrainer(const TrainSetup& t, const TrainFlags& f, exec::gpu::RemoteLinks* remote)
      : t_(t),
        precision_(f.precision),
        remote_(remote),
        pipeline_(t.schedule, gpu_config(t, f, remote)) {}

  exec::ExecResult run() {
    exec::ExecResult local = pipeline_.run();
    return remote_ ? exec::gather_result(*remote_, t_.schedule, local) : local;
  }
  std::size_t snapshots() const {
    return pipeline_.stage(pipeline_.first_local_stage()).snapshots();
  }
  double validate(std::optional<std::size_t> snapshot, const exec::DataFn& val,
                  std::uint64_t count) {
    std::vector<cuda::TensorView> weights(static_cast<std::size_t>(t_.schedule.stages));
    for (std::int32_t s = 0; s < t_.schedule.stages; ++s)
      if (pipeline_.runs(s))
        weights[static_cast<std::size_t>(s)] =
            snapshot ? pipeline_.stage(s).snapshot(*snapshot) : pipeline_.stage(s).weights();
    return pipeline_.evaluate(weights, val, 0, count);
  }
  RunSummary summary(const exec::ExecResult& r) const { return pipeline_.summary(r); }
  std::vector<model::StageStateView> state_views() {
    host_.clear();
    for (std::int32_t s = 0; s < t_.schedule.stages; ++s) {
      if (!pipeline_.runs(s)) continue;
      const exec::gpu::GpuStageRuntime& rt = pipeline_.stage(s);
      host_.push_back({rt.layout().range(), rt.optimizer_steps(), rt.params(), rt.first_moment(),
                       rt.second_moment()});
    }
    if (remote_) {  // every process's stages, on the writer
      std::vector<model::StageStateView> mine;
      for (const auto& h : host_) mine.push_back(h.view());
      host_ = exec::gather_stage_states(*remote_, t_.schedule, mine);
    }
    std::vector<model::StageStateView> views;
    for (const auto& h : host_) views.push_back(h.view());
    return views;
  }
  std::vector<float> whole_params() {
    std::vector<float> params;
    if (remote_) {  // every stage's weights come with the gathered states
      for (const model::StageStateView& v : state_views())
        params.insert(params.end(), v.weights.begin(), v.weights.end());
      return params;
    }
    for (std::int32_t s = 0; s < t_.schedule.stages; ++s) {
      const auto p = pipeline_.stage(s).params();
      params.insert(params.end(), p.begin(), p.end());
    }
    return params;
  }
  void describe(ordered_json& keys) const {
    keys["device"] = cuda::device_description();
    keys["precision"] = precision_;
    if (remote_) keys["processes"] = t_.schedule.num_devices();
  }

 private:
  const TrainSetup& t_;
  std::string precision_;
  exec::gpu::RemoteLinks* remote_;
  exec::gpu::GpuPipeline pipeline_;
  std::vector<model::StageState> host_;  // state_views() storage
};

#ifdef PACI_HAVE_NCCL
// How long a process waits for the others to join (the rendezvous and NCCL's set-up).
constexpr std::chrono::seconds kJoinTimeout{300};

int run_train_processes(TrainSetup& t, const TrainFlags& f, const exec::LaunchInfo& info) {
  try {
    exec::check_launch(t.schedule, info.world_size);  // before waiting on anyone
  } catch (const InputError& e) {
    if (info.rank != 0) throw exec::QuietExit(e.what(), 2);  // process 0 says it
    throw;
  }
  const std::chrono::seconds timeout = exec::link_timeout();
  cuda::NcclCommunicator world =
      exec::gpu::connect_ranks(info, exec::rendezvous_endpoint_from_environment(), kJoinTimeout);
  exec::gpu::NcclLinks links(world, t.schedule, run_fingerprint(t, f), timeout);
  const bool writer = info.rank == exec::last_stage_device(t.schedule);
  return train_with<GpuTrainer>(t, f, writer, &links);
}
#endif

}  // namespace

int run_train_gpu(TrainSetup& t, const TrainFlags& f, const exec::LaunchInfo& launch) {
  // Before the first CUDA call: load every kernel when the context is created. With CUDA 12+'s
  // lazy loading, the first launch of a backward, AdamW or cuBLAS kernel mid-run loads its module
  // and can wait behind NCCL transfers that wait on other processes. A user's own
  // setting is kept.
  ::setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  if (launch.world_size > 1) {
#ifdef PACI_HAVE_NCCL
    return run_train_processes(t, f, launch);
#else
    throw InputError(fmt::format(
        "started as process {} of {} by a launcher ({}), but this paci was built without NCCL, "
        "which one process per GPU needs (see docs/cuda.md)",
        launch.rank, launch.world_size, launch.source));
#endif
  }
  return train_with<GpuTrainer>(t, f, true, static_cast<exec::gpu::RemoteLinks*>(nullptr));
}

}  // namespace paci::cli
