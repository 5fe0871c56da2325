// paci train — trains the GPT on a schedule (generated, or a file) with the pipeline executor: on
// the CPU (one worker thread per device, or a sequential replay) or, with --device cuda, on one
// GPU (cli/gpu/train_gpu.cpp). Both write the shared report and trace, metrics JSONL, checkpoints.
#include <fmt/format.h>
#include <iostream>

#include "cli/common.hpp"
#include "cli/train_run.hpp"
#include "cli/train_setup.hpp"
#include "exec/executor.hpp"

namespace paci::cli {

namespace {

// The CPU backend as train_run.hpp's Trainer.
class CpuTrainer {
 public:
  CpuTrainer(const TrainSetup& t, const TrainFlags&) : t_(t), ex_(t.schedule, t.exec) {}

  exec::ExecResult run() { return ex_.run(); }
  std::size_t snapshots() const { return ex_.stage(0).snapshots(); }
  double validate(std::optional<std::size_t> snapshot, const exec::DataFn& val,
                  std::uint64_t count) {
    std::vector<std::span<const float>> params;
    for (std::int32_t s = 0; s < t_.schedule.stages; ++s)
      params.push_back(snapshot ? ex_.stage(s).snapshot(*snapshot)
                                : std::span<const float>(ex_.stage(s).params()));
    return ex_.evaluate(params, val, 0, count);
  }
  RunSummary summary(const exec::ExecResult& r) const { return ex_.summary(r); }
  std::vector<model::StageStateView> state_views() {
    std::vector<model::StageStateView> views;
    for (std::int32_t s = 0; s < t_.schedule.stages; ++s) {
      const exec::StageRuntime& rt = ex_.stage(s);
      views.push_back({rt.layout().range(), rt.optimizer().steps(), rt.params(),
                       rt.optimizer().first_moment(), rt.optimizer().second_moment()});
    }
    return views;
  }
  std::vector<float> whole_params() {
    std::vector<float> params;
    for (std::int32_t s = 0; s < t_.schedule.stages; ++s) {
      const auto p = ex_.stage(s).params();
      params.insert(params.end(), p.begin(), p.end());
    }
    return params;
  }
  void describe(ordered_json& keys) const {
    keys["device"] = "cpu";
    keys["threads_per_device"] = t_.exec.threads_per_device;
  }

 private:
  const TrainSetup& t_;
  exec::Executor ex_;
};

}  // namespace

int run_train(const std::vector<std::string>& args) {
  TrainFlags f;
  po::options_description options("options");
  add_train_options(options, f);
  po::variables_map vm;
  if (!parse_options("train",
                     "(--kind K --stages P --microbatches M --steps N | --schedule FILE) "
                     "[model, data, optimizer flags] [--device cpu|cuda] [--report R] [--trace T]",
                     options, {}, args, vm))
    return 0;
  TrainSetup t = make_train_setup(f, vm);
  const exec::LaunchInfo launch = launch_info();
  if (launch.world_size > 1 && f.device != "cuda")
    throw InputError(fmt::format(
        "started as process {} of {} by a launcher ({}), but --device cpu runs every stage in "
        "one process: start it once, or use --device cuda for one process per GPU",
        launch.rank, launch.world_size, launch.source));
  if (!f.quiet && launch.rank == 0)
    for (const auto& note : t.notes) std::cerr << "paci train: note: " << note << '\n';
  if (f.device == "cuda") return run_train_gpu(t, f, launch);
  return train_with<CpuTrainer>(t, f, true);
}

}  // namespace paci::cli
