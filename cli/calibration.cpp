// cost_model_from_calibration.
#include "cli/calibration.hpp"

namespace paci::cli {

CostModel cost_model_from_calibration(const exec::Calibration& c, std::string description) {
  CostModel m;
  m.description = std::move(description);
  m.tokens_per_microbatch = c.tokens_per_microbatch;
  m.default_link.latency_s = c.link.latency_s;
  m.default_link.bandwidth_bytes_per_s = c.link.bandwidth_bytes_per_s;
  const std::size_t P = c.stages.size();
  for (std::size_t s = 0; s < P; ++s) {
    const exec::StageMeasurement& x = c.stages[s];
    StageCost sc;
    sc.forward_s = x.forward_s;
    sc.backward_s = x.backward_s;
    sc.input_grad_s = x.backward_s / 2;
    sc.weight_grad_s = x.backward_s / 2;
    sc.update_s = x.update_s;
    sc.activation_bytes = x.activation_bytes;
    sc.activation_message_bytes = s + 1 < P ? x.message_bytes : 0;
    sc.gradient_message_bytes = s > 0 ? x.message_bytes : 0;
    sc.weight_bytes = x.weight_bytes;
    sc.gradient_bytes = x.gradient_bytes;
    sc.optimizer_bytes = x.optimizer_bytes;
    m.stages.push_back(sc);
  }
  return m;
}

}  // namespace paci::cli
