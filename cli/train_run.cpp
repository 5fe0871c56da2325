// TrainOutputs: metrics JSONL, progress, validation, report, trace, checkpoint, export and the
// summary line of paci train, whatever backend ran the schedule.
#include "cli/train_run.hpp"

#include <fmt/format.h>
#include <cmath>
#include <iostream>
#include <stdexcept>

#include "cli/load.hpp"
#include "exec/stage_runtime.hpp"
#include "exec/train_report.hpp"
#include "exec/train_save.hpp"
#include "model/checkpoint_llmc.hpp"
#include "model/layout.hpp"
#include "traces/chrome_trace.hpp"
#include "traces/report_timeline.hpp"

namespace paci::cli {

TrainOutputs::TrainOutputs(TrainSetup& t, const TrainFlags& f, bool writer)
    : t_(t),
      f_(f),
      progress_(fmt::format("{} P={}", t.schedule.kind, t.schedule.stages),
                static_cast<std::int64_t>(t.start_step), static_cast<std::int64_t>(t.last_step),
                f.quiet || !writer),
      tokens_per_step_(static_cast<double>(t.schedule.microbatches) *
                       static_cast<double>(t.exec.batch * t.exec.seq_len)),
      writer_(writer) {}

TrainOutputs::~TrainOutputs() = default;

void TrainOutputs::add_metric(const ordered_json& j) {
  std::lock_guard lock(mutex_);
  lines_ += j.dump() + "\n";
}

void TrainOutputs::step_metric(const exec::StepLoss& s, bool running) {
  const std::size_t step = t_.first_step + static_cast<std::size_t>(s.step) + 1;
  const double tokens = tokens_per_step_ * static_cast<double>(step - t_.start_step);
  ordered_json j;
  j["step"] = step;
  j["loss"] = s.loss;
  j["lr"] = t_.exec.lr.at(step - 1);
  j["tokens"] = tokens_per_step_ * static_cast<double>(step);
  j["tokens_per_s"] = s.time_s > 0 ? tokens / s.time_s : 0.0;
  j["elapsed_s"] = s.time_s;
  add_metric(j);
  if (running) progress_.update(static_cast<std::int64_t>(step), s.loss, tokens, s.time_s);
}

void TrainOutputs::install_step_hook() {
  t_.exec.on_step = [this](const exec::StepLoss& s) {
    if (!s.whole) {  // one copy's half of the step ran here: the progress line, no metrics
      const std::size_t step = t_.first_step + static_cast<std::size_t>(s.step) + 1;
      progress_.update(static_cast<std::int64_t>(step), s.loss,
                       tokens_per_step_ * static_cast<double>(step - t_.start_step), s.time_s);
      return;
    }
    {
      std::lock_guard lock(mutex_);
      steps_seen_.insert(s.step);
    }
    step_metric(s, true);
  };
  saver_ = exec::install_periodic_saves(t_, f_);
}

void TrainOutputs::add_unseen_steps(const exec::ExecResult& result) {
  const Schedule& s = t_.schedule;
  // When the last of each step's forwards on a last stage ended, as the hook would have said.
  std::vector<double> ended(result.step_losses.size(), 0.0);
  for (std::size_t d = 0; d < s.devices.size(); ++d)
    for (std::size_t i = 0; i < s.devices[d].size() && i < result.times[d].size(); ++i) {
      const Action& a = s.devices[d][i];
      const auto k = static_cast<std::size_t>(a.microbatch / s.microbatches);
      if (a.kind == ActionKind::F && s.last_stage(a.stage) && k < ended.size())
        ended[k] = std::max(ended[k], result.times[d][i].end_s);
    }
  for (std::size_t k = 0; k < result.step_losses.size(); ++k) {
    // Steps before a resumed run's start are the checkpoint's; those seen were written.
    if (t_.first_step + k + 1 <= t_.start_step ||
        steps_seen_.contains(static_cast<std::int32_t>(k)))
      continue;
    step_metric({static_cast<std::int32_t>(k), result.step_losses[k], ended[k],
                 static_cast<std::int64_t>(k + 1) * s.microbatches},
                false);
  }
}

void TrainOutputs::abandon() {
  progress_.finish();
  if (writer_ && !f_.metrics_path.empty()) write_output(f_.metrics_path, lines_);
}

void TrainOutputs::validate_all(std::size_t snapshots, const Validate& validate) {
  // The weights after every --val-every steps (snapshots), and the final weights.
  if (!t_.val) return;
  const auto every = static_cast<std::size_t>(std::max(f_.val_every, 1));
  for (std::size_t k = 0; k < snapshots; ++k)
    val_losses_.emplace_back((t_.first_step / every + k + 1) * every, validate(k));
  if (val_losses_.empty() || val_losses_.back().first != t_.last_step)
    val_losses_.emplace_back(t_.last_step, validate(std::nullopt));
}

void TrainOutputs::write_results(const exec::ExecResult& result, const RunSummary& run,
                                 ordered_json backend_keys) {
  const std::vector<double> aux = result.step_aux_losses(t_.schedule.microbatches);
  for (std::size_t k = 0; k < aux.size(); ++k) {
    if (t_.first_step + k + 1 <= t_.start_step) continue;  // a cut's steps done before it
    ordered_json j;  // known at the end: every stage's share, from every process
    j["step"] = t_.first_step + k + 1;
    j["aux_loss"] = aux[k];
    add_metric(j);
  }
  for (const auto& [step, loss] : val_losses_) {
    ordered_json j;
    j["step"] = step;
    j["val_loss"] = loss;
    add_metric(j);
  }
  if (!f_.metrics_path.empty()) write_output(f_.metrics_path, lines_);
  if (!f_.report_path.empty()) {
    write_output(f_.report_path, exec::measured_report(t_, result, run, backend_keys, val_losses_));
  }
  if (!f_.trace_path.empty()) write_chrome_trace(result.timeline, f_.trace_path);
}

void TrainOutputs::save_checkpoint(const std::vector<model::StageStateView>& views) const {
  model::save_state(
      f_.save_path,
      exec::state_metadata(t_, t_.first_step + static_cast<std::size_t>(t_.schedule.steps)), views);
}

void TrainOutputs::export_whole_model(const std::vector<float>& params) const {
  const model::ParamLayout whole(t_.exec.config, model::whole_model(t_.exec.config));
  const std::string warning = model::export_llmc(f_.export_path, whole, params);
  if (!warning.empty()) std::cerr << "paci train: note: " << warning << '\n';
}

void TrainOutputs::print_summary(const exec::ExecResult& result, const RunSummary& run) const {
  if (f_.quiet) return;
  const double tokens = tokens_per_step_ * static_cast<double>(t_.last_step - t_.start_step);
  std::cerr << fmt::format(
      "paci train: {} on {} stages, steps {}..{}, final loss {:.4f}{}, {:.0f} tokens/s, "
      "bubble {:.1f}%, {} wall\n",
      t_.schedule.kind, t_.schedule.stages, t_.start_step + 1, t_.last_step,
      result.step_losses.empty() ? NAN : result.step_losses.back(),
      val_losses_.empty() ? "" : fmt::format(", val loss {:.4f}", val_losses_.back().second),
      result.wall_s > 0 ? tokens / result.wall_s : 0.0, 100.0 * run.timing.bubble_ratio,
      format_duration(result.wall_s));
}

}  // namespace paci::cli
