// paci train — trains the GPT on a schedule (generated, or a file) with the pipeline executor:
// one worker thread per device, the shared report and trace, metrics JSONL, checkpoints.
#include <fmt/format.h>
#include <cmath>
#include <iostream>
#include <mutex>
#include <thread>

#include "cli/common.hpp"
#include "cli/load.hpp"
#include "cli/progress.hpp"
#include "cli/train_setup.hpp"
#include "exec/executor.hpp"
#include "model/checkpoint_llmc.hpp"
#include "model/checkpoint_state.hpp"
#include "traces/chrome_trace.hpp"
#include "traces/report.hpp"

namespace paci::cli {

namespace {

// Metrics JSONL lines, collected during the run and written (atomically) at its end.
struct Metrics {
  std::mutex mutex;
  std::string lines;
  void add(const ordered_json& j) {
    std::lock_guard lock(mutex);
    lines += j.dump() + "\n";
  }
};

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

void save_checkpoint(const std::string& path, const TrainSetup& t, exec::Executor& ex) {
  std::vector<model::StageStateView> views;
  for (std::int32_t s = 0; s < t.schedule.stages; ++s) {
    const exec::StageRuntime& rt = ex.stage(s);
    views.push_back({rt.layout().range(), rt.optimizer().steps(), rt.params(),
                     rt.optimizer().first_moment(), rt.optimizer().second_moment()});
  }
  model::save_state(
      path, state_metadata(t, t.first_step + static_cast<std::size_t>(t.schedule.steps)), views);
}

void export_whole_model(const std::string& path, const TrainSetup& t, exec::Executor& ex) {
  const model::ParamLayout whole(t.exec.config, model::whole_model(t.exec.config));
  std::vector<float> params;
  for (std::int32_t s = 0; s < t.schedule.stages; ++s) {
    const auto p = ex.stage(s).params();
    params.insert(params.end(), p.begin(), p.end());
  }
  const std::string warning = model::export_llmc(path, whole, params);
  if (!warning.empty()) std::cerr << "paci train: note: " << warning << '\n';
}

}  // namespace

int run_train(const std::vector<std::string>& args) {
  TrainFlags f;
  po::options_description options("options");
  add_train_options(options, f);
  po::variables_map vm;
  if (!parse_options("train",
                     "(--kind K --stages P --microbatches M --steps N | --schedule FILE) "
                     "[model, data, optimizer flags] [--report R] [--trace T]",
                     options, {}, args, vm))
    return 0;
  TrainSetup t = make_train_setup(f, vm);
  Metrics metrics;
  const double tokens_per_step = static_cast<double>(t.schedule.microbatches) *
                                 static_cast<double>(t.exec.batch * t.exec.seq_len);
  Progress progress(fmt::format("{} P={}", t.schedule.kind, t.schedule.stages),
                    static_cast<std::int64_t>(t.first_step), static_cast<std::int64_t>(t.last_step),
                    f.quiet);
  t.exec.on_step = [&](const exec::StepLoss& s) {
    const std::size_t step = t.first_step + static_cast<std::size_t>(s.step) + 1;
    const double tokens = tokens_per_step * (s.step + 1);
    ordered_json j;
    j["step"] = step;
    j["loss"] = s.loss;
    j["lr"] = t.exec.lr.at(step - 1);
    j["tokens"] = tokens_per_step * static_cast<double>(step);
    j["tokens_per_s"] = s.time_s > 0 ? tokens / s.time_s : 0.0;
    j["elapsed_s"] = s.time_s;
    metrics.add(j);
    progress.update(static_cast<std::int64_t>(step), s.loss, tokens, s.time_s);
  };
  exec::Executor ex(t.schedule, t.exec);
  exec::ExecResult result;
  try {
    result = ex.run();
  } catch (...) {
    progress.finish();
    if (!f.metrics_path.empty()) write_output(f.metrics_path, metrics.lines);
    throw;
  }
  progress.finish();

  // Validation: the weights after every --val-every steps (snapshots), and the final weights.
  std::vector<std::pair<std::size_t, double>> val_losses;
  if (t.val) {
    const exec::DataFn val = [&](std::uint64_t i, std::span<std::int32_t> in,
                                 std::span<std::int32_t> out) {
      t.val->microbatch(i, t.exec.batch, t.exec.seq_len, in, out);
    };
    const std::size_t snapshots = ex.stage(0).snapshots();
    for (std::size_t k = 0; k < snapshots; ++k) {
      std::vector<std::span<const float>> params;
      for (std::int32_t s = 0; s < t.schedule.stages; ++s)
        params.push_back(ex.stage(s).snapshot(k));
      const auto every = static_cast<std::size_t>(f.val_every);
      val_losses.emplace_back((t.first_step / every + k + 1) * every,
                              ex.evaluate(params, val, 0, f.val_microbatches));
    }
    if (val_losses.empty() || val_losses.back().first != t.last_step) {
      std::vector<std::span<const float>> params;
      for (std::int32_t s = 0; s < t.schedule.stages; ++s) params.push_back(ex.stage(s).params());
      val_losses.emplace_back(t.last_step, ex.evaluate(params, val, 0, f.val_microbatches));
    }
    for (const auto& [step, loss] : val_losses) {
      ordered_json j;
      j["step"] = step;
      j["val_loss"] = loss;
      metrics.add(j);
    }
  }
  if (!f.metrics_path.empty()) write_output(f.metrics_path, metrics.lines);

  const RunSummary run = ex.summary(result);
  if (!f.report_path.empty()) {
    ordered_json head = run_report_head(t.schedule, run);
    head["model"] = {{"layers", t.exec.config.layers},   {"heads", t.exec.config.heads},
                     {"d_model", t.exec.config.d_model}, {"seq_len", t.exec.seq_len},
                     {"vocab", t.exec.config.vocab},     {"batch", t.exec.batch}};
    head["partition"] = ordered_json::array();
    for (const auto& r : t.exec.ranges) head["partition"].push_back(r.num_layers);
    head["threads_per_device"] = t.exec.threads_per_device;
    head["first_step"] = t.first_step;
    head["loss"] = result.step_losses;
    head["val_loss"] = ordered_json::array();
    for (const auto& [step, loss] : val_losses)
      head["val_loss"].push_back({{"step", step}, {"val_loss", loss}});
    head["wall_s"] = result.wall_s;
    write_output(f.report_path, report_with_versions(head, run.observed.versions));
  }
  if (!f.trace_path.empty()) write_chrome_trace(result.timeline, f.trace_path);
  if (!f.save_path.empty()) save_checkpoint(f.save_path, t, ex);
  if (!f.export_path.empty()) export_whole_model(f.export_path, t, ex);

  if (!f.quiet) {
    const double tokens = tokens_per_step * t.schedule.steps;
    std::cerr << fmt::format(
        "paci train: {} on {} stages, steps {}..{}, final loss {:.4f}{}, {:.0f} tokens/s, "
        "bubble {:.1f}%, {} wall\n",
        t.schedule.kind, t.schedule.stages, t.first_step + 1, t.last_step,
        result.step_losses.empty() ? NAN : result.step_losses.back(),
        val_losses.empty() ? "" : fmt::format(", val loss {:.4f}", val_losses.back().second),
        result.wall_s > 0 ? tokens / result.wall_s : 0.0, 100.0 * run.timing.bubble_ratio,
        format_duration(result.wall_s));
  }
  return 0;
}

}  // namespace paci::cli
