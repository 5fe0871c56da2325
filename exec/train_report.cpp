// measured_report.
#include "exec/train_report.hpp"

#include "exec/machine.hpp"
#include "model/blas_kernel.hpp"
#include "model/checkpoint_state.hpp"
#include "traces/report_timeline.hpp"

namespace paci::exec {

std::string measured_report(const TrainSetup& t, const ExecResult& result, const RunSummary& run,
                            const ordered_json& backend_keys,
                            const std::vector<std::pair<std::size_t, double>>& val_losses) {
  ordered_json head = run_report_head(t.schedule, run);
  head["model"] = {{"layers", t.exec.config.layers},   {"heads", t.exec.config.heads},
                   {"d_model", t.exec.config.d_model}, {"seq_len", t.exec.seq_len},
                   {"vocab", t.exec.config.vocab},     {"batch", t.exec.batch}};
  if (const model::MoeConfig& m = t.exec.config.moe; m.enabled())
    head["model"]["moe"] = model::moe_json<ordered_json>(m);
  head["partition"] = ordered_json::array();
  for (const auto& r : t.exec.ranges) head["partition"].push_back(r.num_layers);
  head["blas"] = blas_json(model::blas_identity());  // the CPU BLAS and kernel this run used
  for (const auto& [key, value] : backend_keys.items()) head[key] = value;
  head["first_step"] = t.first_step;
  head["loss"] = result.step_losses;
  if (const auto aux = result.step_aux_losses(t.schedule.microbatches); !aux.empty())
    head["aux_loss"] = aux;  // the MoE blocks' load-balancing losses, per step
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
