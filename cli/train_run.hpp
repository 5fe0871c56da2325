// paci train after its setup, shared by the backends (exec/trainer.hpp's Trainers): the step hook
// (metrics JSONL, progress), the run, validation, the report, the trace, the checkpoint, the llm.c
// export and the summary line.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cli/common.hpp"
#include "cli/progress.hpp"
#include "cli/train_setup.hpp"
#include "exec/machine.hpp"
#include "model/checkpoint_state.hpp"
#include "traces/report.hpp"

namespace paci::cli {

// What a run leaves behind. Metrics JSONL lines are collected during the run and written
// (atomically) at its end. One process per device: every process goes through the same calls
// (validation and the gathers behind state_views() and whole_params() are collective), and only
// the writer (the process running the last stage, where the losses are) writes or prints.
class TrainOutputs {
 public:
  TrainOutputs(TrainSetup& t, const TrainFlags& f, bool writer = true);
  ~TrainOutputs();
  // Installs the per-step hook (metrics line, progress) into t.exec.on_step, and with
  // --save-every the periodic checkpoints into t.exec.after_update.
  void install_step_hook();
  // After a failed run: ends the progress line and writes the metrics gathered so far.
  void abandon();
  // Runs validation through `validate(snapshot or nullopt)`, writes metrics, report, trace,
  // checkpoint and export, and prints the summary line.
  template <typename Trainer>
  void finish(Trainer& trainer, const exec::ExecResult& result);

 private:
  using Validate = std::function<double(std::optional<std::size_t>)>;
  // Validation of every snapshot and of the final weights, into val_losses_.
  void validate_all(std::size_t snapshots, const Validate& validate);
  // Metrics, report and trace.
  void write_results(const exec::ExecResult& result, const RunSummary& run,
                     ordered_json backend_keys);
  void print_summary(const exec::ExecResult& result, const RunSummary& run) const;
  void save_checkpoint(const std::vector<model::StageStateView>& views) const;
  void export_whole_model(const std::vector<float>& params) const;
  void add_metric(const ordered_json& j);
  // A step's metrics line (and, while running, the progress line).
  void step_metric(const exec::StepLoss& s, bool running);
  // The steps no process saw whole while running (two copies, one process per device: each
  // last stage's process holds half of every step's losses), from the merged result.
  void add_unseen_steps(const exec::ExecResult& result);

  TrainSetup& t_;
  const TrainFlags& f_;
  std::shared_ptr<void> saver_;  // --save-every's, while the run lasts
  std::mutex mutex_;
  std::string lines_ =
      exec::metrics_head_line(t_, PACI_VERSION);  // the run and its BLAS first; t_ is set by now
  Progress progress_;
  double tokens_per_step_ = 0.0;
  std::vector<std::pair<std::size_t, double>> val_losses_;
  bool writer_ = true;
  std::set<std::int32_t> steps_seen_;  // the schedule's steps reported while running (mutex_)
};

template <typename Trainer>
void TrainOutputs::finish(Trainer& trainer, const exec::ExecResult& result) {
  progress_.finish();
  exec::DataFn val;
  if (t_.val)
    val = [&](std::uint64_t i, std::span<std::int32_t> in, std::span<std::int32_t> out) {
      t_.val->microbatch(i, t_.exec.batch, t_.exec.seq_len, in, out);
    };
  // Every collective step first, on every process, so that a writer failing to write cannot
  // leave the others waiting: validation, the whole model, then the state (whole_params may reuse
  // state_views' storage).
  validate_all(trainer.snapshots(), [&](std::optional<std::size_t> k) {
    return trainer.validate(k, val, f_.val_microbatches);
  });
  std::vector<float> params;
  if (!f_.export_path.empty()) params = trainer.whole_params();
  std::vector<model::StageStateView> views;
  if (!f_.save_path.empty()) views = trainer.state_views();
  if (!writer_) return;
  ordered_json backend_keys = ordered_json::object();
  trainer.describe(backend_keys);
  const RunSummary run = trainer.summary(result);
  add_unseen_steps(result);
  write_results(result, run, std::move(backend_keys));
  if (!f_.save_path.empty()) save_checkpoint(views);
  if (!f_.export_path.empty()) export_whole_model(params);
  print_summary(result, run);
}

// paci train with the backend `Trainer`, constructed as Trainer(t, f, extra...) once the step
// hook is in t.exec: the run, then every output (written when `writer`); on a failure the metrics
// gathered so far are written.
template <typename Trainer, typename... Extra>
int train_with(TrainSetup& t, const TrainFlags& f, bool writer, Extra&&... extra) {
  TrainOutputs outputs(t, f, writer);
  outputs.install_step_hook();
  Trainer trainer(t, f, std::forward<Extra>(extra)...);
  exec::ExecResult result;
  try {
    result = trainer.run();
  } catch (...) {
    outputs.abandon();
    throw;
  }
  outputs.finish(trainer, result);
  return 0;
}

}  // namespace paci::cli
