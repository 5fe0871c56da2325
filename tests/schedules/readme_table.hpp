// What the tests of DualPipe's README table (tests/schedules/test_generators_dualpipe*.cpp) measure
// a simulated step with: each device's idle time, and uniform costs whose peaks count in stages'
// worth of activations.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "sim/cost_model.hpp"
#include "sim/engine.hpp"
#include "traces/metrics.hpp"

namespace paci::testing {

// Idle time of each device over a simulated flushed step: makespan minus its busy time; its peak
// memory into *peaks when given.
inline std::vector<double> idle(const Schedule& s, const CostModel& c,
                                std::vector<std::int64_t>* peaks) {
  const SimResult r = simulate(s, c, {false});
  const RunSummary run = run_summary(s, c, r);
  std::vector<double> out;
  for (const double busy : run.timing.device_busy_s) out.push_back(run.timing.makespan_s - busy);
  if (peaks) *peaks = r.device_peak_memory_bytes;
  return out;
}

// Uniform F, B (a full backward), W and F&B on `stages` stages; one byte of activations a
// stage-micro-batch, and one stage's weights 1000 bytes (4000 with gradients and AdamW state).
inline CostModel costs(std::int32_t stages, double F, double B, double W,
                       std::optional<double> FB) {
  UniformCosts u;
  u.tf = F;
  u.tb = B;
  u.tw = W;
  u.tfb = FB;
  u.activation_bytes = 1;
  u.weight_bytes = 1000;
  return uniform_cost_model(stages, u);
}

}  // namespace paci::testing
