// measured_report.
#include "exec/train_report.hpp"

#include "exec/machine.hpp"
#include "model/blas_kernel.hpp"
#include "model/checkpoint_state.hpp"
#include "traces/report_timeline.hpp"

namespace paci::exec {

namespace {

// Per block of a mixture of experts: the tokens that chose each expert over the run and the
// busiest expert's share against the mean (1: balanced; what paci plan's expert_load states).
// Two copies of the model: a block's tokens in both copies, each copy routing its half.
ordered_json expert_load(const TrainSetup& t, const ExecResult& result) {
  ordered_json blocks = ordered_json::array();
  const std::size_t E = t.exec.config.moe.experts;
  const auto stages = std::min(result.stage_expert_tokens.size(),
                               static_cast<std::size_t>(t.schedule.stages_per_copy()));
  for (std::size_t s = 0; s < stages; ++s) {
    std::vector<std::int64_t> tokens = result.stage_expert_tokens[s];
    const std::int32_t twin = t.schedule.twin(static_cast<std::int32_t>(s));
    if (twin >= 0 && static_cast<std::size_t>(twin) < result.stage_expert_tokens.size()) {
      const std::vector<std::int64_t>& more =
          result.stage_expert_tokens[static_cast<std::size_t>(twin)];
      if (more.size() != tokens.size())
        throw std::runtime_error(fmt::format("stages {} and {} report {} and {} expert counts", s,
                                             twin, tokens.size(), more.size()));
      for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] += more[i];
    }
    if (tokens.size() != t.exec.ranges.at(s).num_layers * E && !tokens.empty())
      throw std::runtime_error(fmt::format("stage {} reports {} expert counts for {} blocks of {}",
                                           s, tokens.size(), t.exec.ranges.at(s).num_layers, E));
    for (std::size_t l = 0; l * E < tokens.size(); ++l) {
      const auto first = tokens.begin() + static_cast<std::ptrdiff_t>(l * E);
      const std::vector<std::int64_t> counts(first, first + static_cast<std::ptrdiff_t>(E));
      std::int64_t sum = 0, most = 0;
      for (const std::int64_t n : counts) {
        sum += n;
        most = std::max(most, n);
      }
      const double ratio =
          sum > 0 ? static_cast<double>(most) * static_cast<double>(E) / static_cast<double>(sum)
                  : 0.0;
      blocks.push_back({{"block", t.exec.ranges.at(s).first_layer + l},
                        {"tokens", counts},
                        {"max_over_mean", ratio}});
    }
  }
  return blocks;
}

}  // namespace

std::string measured_report(const TrainSetup& t, const ExecResult& result, const RunSummary& run,
                            const ordered_json& backend_keys,
                            const std::vector<std::pair<std::size_t, double>>& val_losses) {
  ordered_json head = run_report_head(t.schedule, run);
  head["model"] = {{"layers", t.exec.config.layers},   {"heads", t.exec.config.heads},
                   {"d_model", t.exec.config.d_model}, {"seq_len", t.exec.seq_len},
                   {"vocab", t.exec.config.vocab},     {"batch", t.exec.batch}};
  if (const model::MoeConfig& m = t.exec.config.moe; m.enabled())
    head["model"]["moe"] = model::moe_json<ordered_json>(m);
  head["partition"] = ordered_json::array();  // one copy's (two copies hold the same)
  for (std::int32_t s = 0; s < t.schedule.stages_per_copy(); ++s)
    head["partition"].push_back(t.exec.ranges.at(static_cast<std::size_t>(s)).num_layers);
  head["blas"] = blas_json(model::blas_identity());  // the CPU BLAS and kernel this run used
  for (const auto& [key, value] : backend_keys.items()) head[key] = value;
  head["first_step"] = t.first_step;
  head["loss"] = result.step_losses;
  if (const auto aux = result.step_aux_losses(t.schedule.microbatches); !aux.empty())
    head["aux_loss"] = aux;  // the MoE blocks' load-balancing losses, per step
  if (t.exec.config.moe.enabled()) head["expert_load"] = expert_load(t, result);
  head["val_loss"] = ordered_json::array();
  for (const auto& [step, loss] : val_losses)
    head["val_loss"].push_back({{"step", step}, {"val_loss", loss}});
  head["wall_s"] = result.wall_s;
  if (result.message_buffers_preallocated > 0)  // the GPU pipeline's
    head["message_buffers"] = {{"preallocated", result.message_buffers_preallocated},
                               {"grown", result.message_buffers_grown},
                               {"peak_in_use", result.peak_messages_in_flight}};
  // Every action's and message's measured times: what paci simulate --replay replays.
  head["timeline"] = timeline_json(result.times, result.timeline.messages);
  return report_with_versions(head, run.observed.versions);
}

}  // namespace paci::exec
