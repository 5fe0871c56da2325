// TrainOutputs: metrics JSONL, progress, validation, report, trace, checkpoint, export and the
// summary line of paci train, whatever backend ran the schedule.
#include "cli/train_run.hpp"

#include <fmt/format.h>
#include <cmath>
#include <iostream>
#include <stdexcept>

#include "cli/load.hpp"
#include "cli/train_cut.hpp"
#include "exec/stage_runtime.hpp"
#include "model/checkpoint_llmc.hpp"
#include "model/layout.hpp"
#include "traces/chrome_trace.hpp"
#include "traces/report_timeline.hpp"

namespace paci::cli {

namespace {

model::StateMetadata state_metadata(const TrainSetup& t, std::size_t steps_done) {
  model::StateMetadata m;
  m.config = t.exec.config;
  m.step = steps_done;
  m.next_microbatch = t.first_microbatch + (steps_done - t.first_step) *
                                               static_cast<std::size_t>(t.schedule.microbatches);
  m.data_seed = t.data_seed;
  m.data_order = std::string(model::to_string(t.data_order));
  m.lr_schedule = t.exec.lr;
  m.lr_schedule.total_steps = t.total_steps;
  m.adamw = t.exec.adamw;
  m.extra["kind"] = t.schedule.kind;
  m.extra["microbatches"] = t.schedule.microbatches;
  m.extra["batch"] = t.exec.batch;
  m.extra["seq_len"] = t.exec.seq_len;
  return m;
}

}  // namespace

// --save-every K: every stage copies its weights and AdamW state right after its update of each
// K-th step, and the stage completing a step's set writes the checkpoint (save_state: a temporary
// file, fsync, rename, so the last complete one stays until the new one is whole). The schedule's
// steps are cuts (make_train_setup checked): when a stage updates for step k nothing of a later
// step has run on it and nothing of step k is left, so the copies form the state of the run after
// step k. One set of buffers (the weights and both moments once more), allocated here, not
// during the run, is enough: a stage's update of step k + 1 needs a forward of step k + 1 on every
// stage, which each runs after its own update of step k (a cut), and so, on the writer's thread,
// after the write of step k has returned.
class TrainOutputs::PeriodicSaver {
 public:
  PeriodicSaver(const TrainSetup& t, const TrainFlags& f)
      : t_(t), path_(f.save_path), every_(static_cast<std::size_t>(f.save_every)) {
    for (const model::StageRange& range : t.exec.ranges) {
      const std::size_t n = model::ParamLayout(t.exec.config, range).size();
      slot_.stages.push_back(
          {range, 0, std::vector<float>(n), std::vector<float>(n), std::vector<float>(n)});
    }
  }

  void after_update(const exec::StageRuntime& rt, std::size_t steps_done) {
    // The last step is written by --save at the end of the run.
    if (steps_done % every_ != 0 || steps_done == t_.last_step) return;
    Slot& slot = slot_;
    rt.copy_state_to(slot.stages.at(static_cast<std::size_t>(rt.stage())));
    {
      std::lock_guard lock(mutex_);
      if (slot.filled > 0 && slot.step != steps_done)
        throw std::logic_error(
            fmt::format("--save-every: stage {} saves step {} while step {} "
                        "is incomplete",
                        rt.stage(), steps_done, slot.step));
      slot.step = steps_done;
      if (++slot.filled < slot.stages.size()) return;
      slot.filled = 0;
    }
    std::vector<model::StageStateView> views;
    for (const model::StageState& s : slot.stages) views.push_back(s.view());
    model::save_state(path_, state_metadata(t_, steps_done), views);
  }

 private:
  struct Slot {
    std::vector<model::StageState> stages;  // one per stage, in stage order
    std::size_t step = 0;
    std::size_t filled = 0;  // stages that have copied their state for `step`
  };
  const TrainSetup& t_;
  std::string path_;
  std::size_t every_;
  Slot slot_;
  std::mutex mutex_;
};

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

void TrainOutputs::install_step_hook() {
  t_.exec.on_step = [this](const exec::StepLoss& s) {
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
    progress_.update(static_cast<std::int64_t>(step), s.loss, tokens, s.time_s);
  };
  const bool from_file = !t_.schedule_file.empty();
  if (f_.save_every > 0 && (step_cut_violation(t_.schedule) || from_file)) {
    // Micro-batches are in flight at every step's end, or the schedule is a file's, which
    // --resume cannot regenerate: save consistent cuts (exec/cut.hpp), a file's carrying it.
    t_.exec.cut_every = f_.save_every;
    t_.exec.on_cut = [this, from_file](const exec::CutImage& image, std::size_t steps_done) {
      model::StateMetadata m = state_metadata(t_, steps_done);
      m.next_microbatch = t_.first_microbatch;  // the data of the cut's schedule's micro-batch 0
      save_cut(f_.save_path, std::move(m),
               {t_.first_step, t_.schedule.steps, t_.exec.snapshot_every,
                from_file ? &t_.schedule : nullptr, t_.schedule_file},
               image);
    };
  } else if (f_.save_every > 0) {
    saver_ = std::make_unique<PeriodicSaver>(t_, f_);
    t_.exec.after_update = [this](const exec::StageRuntime& rt, std::size_t steps_done) {
      saver_->after_update(rt, steps_done);
    };
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
  for (const auto& [step, loss] : val_losses_) {
    ordered_json j;
    j["step"] = step;
    j["val_loss"] = loss;
    add_metric(j);
  }
  if (!f_.metrics_path.empty()) write_output(f_.metrics_path, lines_);
  if (!f_.report_path.empty()) {
    ordered_json head = run_report_head(t_.schedule, run);
    head["model"] = {{"layers", t_.exec.config.layers},   {"heads", t_.exec.config.heads},
                     {"d_model", t_.exec.config.d_model}, {"seq_len", t_.exec.seq_len},
                     {"vocab", t_.exec.config.vocab},     {"batch", t_.exec.batch}};
    head["partition"] = ordered_json::array();
    for (const auto& r : t_.exec.ranges) head["partition"].push_back(r.num_layers);
    head["blas"] = blas_json(model::blas_identity());  // the CPU BLAS and kernel this run used
    for (auto& [key, value] : backend_keys.items()) head[key] = value;
    head["first_step"] = t_.first_step;
    head["loss"] = result.step_losses;
    head["val_loss"] = ordered_json::array();
    for (const auto& [step, loss] : val_losses_)
      head["val_loss"].push_back({{"step", step}, {"val_loss", loss}});
    head["wall_s"] = result.wall_s;
    if (result.message_buffers_preallocated > 0)  // the GPU pipeline's (issue 16)
      head["message_buffers"] = {{"preallocated", result.message_buffers_preallocated},
                                 {"grown", result.message_buffers_grown},
                                 {"peak_in_use", result.peak_messages_in_flight}};
    // Every action's and message's measured times: what paci simulate --replay replays.
    head["timeline"] = timeline_json(result.times, result.timeline.messages);
    write_output(f_.report_path, report_with_versions(head, run.observed.versions));
  }
  if (!f_.trace_path.empty()) write_chrome_trace(result.timeline, f_.trace_path);
}

void TrainOutputs::save_checkpoint(const std::vector<model::StageStateView>& views) const {
  model::save_state(f_.save_path,
                    state_metadata(t_, t_.first_step + static_cast<std::size_t>(t_.schedule.steps)),
                    views);
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
