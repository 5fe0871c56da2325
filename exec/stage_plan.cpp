// Checks, per-stage plans and the observed analysis shared by the CPU and GPU executors.
#include "exec/stage_plan.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <stdexcept>

#include "schedules/validate.hpp"
#include "traces/metrics.hpp"

namespace paci::exec {

void check_runnable(const Schedule& schedule, const TrainingConfig& config) {
  validate(schedule);
  if (config.ranges.size() != static_cast<std::size_t>(schedule.stages))
    throw InputError(fmt::format("the partition has {} stages, the schedule {}",
                                 config.ranges.size(), schedule.stages));
  for (std::int32_t s = 0; s < schedule.stages_per_copy() && schedule.copies > 1; ++s) {
    const model::StageRange& a = config.ranges[static_cast<std::size_t>(s)];
    const model::StageRange& b = config.ranges[static_cast<std::size_t>(schedule.twin(s))];
    if (a.first_layer != b.first_layer || a.num_layers != b.num_layers)
      throw InputError(fmt::format(
          "stages {} and {} are the same layers in {}'s two copies, but the partition gives them "
          "different blocks (give one copy's partition twice)",
          s, schedule.twin(s), schedule.kind));
  }
  if (!config.data) throw std::invalid_argument("TrainingConfig::data is not set");
}

std::size_t StagePlan::snapshot_count() const {
  if (snapshot_every <= 0) return 0;
  const auto k = static_cast<std::size_t>(snapshot_every);
  return (lr_step_offset + static_cast<std::size_t>(updates)) / k - lr_step_offset / k;
}

bool StagePlan::snapshot_after(std::size_t step) const {
  return snapshot_every > 0 && (step + 1) % static_cast<std::size_t>(snapshot_every) == 0;
}

std::vector<StagePlan> plan_stages(const Schedule& schedule, const Analysis& analysis,
                                   const TrainingConfig& config) {
  model::LrSchedule lr = config.lr;
  lr.total_steps =
      std::max(lr.total_steps, config.first_step + static_cast<std::size_t>(schedule.steps));
  std::vector<bool> split(static_cast<std::size_t>(schedule.stages), false);
  for (const auto& list : schedule.devices)
    for (const Action& a : list)
      if (a.kind == ActionKind::I) split[static_cast<std::size_t>(a.stage)] = true;
  std::vector<StagePlan> plans;
  for (std::int32_t s = 0; s < schedule.stages; ++s) {
    const auto& sa = analysis.stages[static_cast<std::size_t>(s)];
    StagePlan p;
    p.shape = {config.config, config.ranges[static_cast<std::size_t>(s)], config.batch,
               config.seq_len};
    p.stage = s;
    p.policy = schedule.weight_policy;
    p.activation_capacity = static_cast<std::size_t>(sa.peak_activations);
    p.split_backward = split[static_cast<std::size_t>(s)];
    p.stash_capacity = static_cast<std::size_t>(sa.peak_weight_versions - 1);
    p.adamw = config.adamw;
    p.lr = lr;
    p.clip = config.clip;
    p.loss_scale = 1.0f / static_cast<float>(schedule.microbatches);
    p.total_microbatches = schedule.total_microbatches();
    p.updates = schedule.steps;
    p.lr_step_offset = config.first_step;
    p.snapshot_every = config.snapshot_every;
    plans.push_back(p);
  }
  return plans;
}

Analysis observed_analysis(const Schedule& schedule, std::span<const StageObservation> stages) {
  Analysis obs;
  obs.total_microbatches = schedule.total_microbatches();
  for (std::int32_t s = 0; s < schedule.stages; ++s) {
    const StageObservation& o = stages[static_cast<std::size_t>(s)];
    if (o.versions == nullptr) continue;  // a stage another process runs
    StageAnalysis sa;
    sa.stage = s;
    sa.device = schedule.placement[static_cast<std::size_t>(s)];
    sa.peak_activations = static_cast<std::int64_t>(o.peak_activations);
    sa.peak_weight_versions = static_cast<std::int64_t>(o.versions->peak_weight_versions());
    sa.updates = o.versions->version();
    obs.stages.push_back(sa);
    for (std::int64_t m = 0; m < obs.total_microbatches; ++m)
      obs.versions.push_back({s, static_cast<std::int32_t>(m), o.versions->v_f(m),
                              o.versions->v_b(m), o.versions->update_of(m)});
  }
  if (static_cast<std::int32_t>(obs.stages.size()) == schedule.stages) summarize_versions(obs);
  return obs;
}

std::vector<double> ExecResult::step_aux_losses(std::int32_t microbatches) const {
  std::vector<double> out;
  for (const std::vector<float>& stage : stage_aux_losses) {
    if (stage.empty()) continue;
    const auto steps = static_cast<std::int32_t>(stage.size()) / microbatches;
    out.resize(static_cast<std::size_t>(steps), 0.0);
    for (std::int32_t k = 0; k < steps; ++k)
      out[static_cast<std::size_t>(k)] += step_mean(std::span<const float>(stage), microbatches, k);
  }
  return out;
}

RunSummary measured_summary(const Schedule& schedule, const ExecResult& result,
                            const TrainingConfig& config) {
  RunSummary run;
  run.source = "measured";
  run.timing = timing_metrics(schedule, result.times);
  run.observed = result.observed;
  run.device_peak_memory_bytes = result.device_peak_memory_bytes;
  run.tokens_per_microbatch = static_cast<std::int64_t>(config.batch * config.seq_len);
  return run;
}

}  // namespace paci::exec
