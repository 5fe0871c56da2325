// The lower bounds of bounds.hpp and the schedule facts they read.
#include "plan/search/bounds.hpp"

#include <algorithm>

#include "base/errors.hpp"
#include "schedules/analysis.hpp"
#include "schedules/generators.hpp"

namespace paci::plan {

ScheduleInfo schedule_info(const PlanConfig& c) {
  ScheduleInfo info;
  try {
    auto s = std::make_shared<Schedule>(
        generate_schedule(c.kind, c.pp, static_cast<std::int32_t>(c.microbatches()),
                          simulated_steps(c), c.kind == "interleaved" ? c.chunks : 0));
    const Analysis a = analyze(*s);
    for (const auto& st : a.stages) info.in_flight.push_back(st.peak_activations);
    info.max_staleness = a.max_lag();
    info.pairs = s->has_overlap();
    info.actions.assign(static_cast<std::size_t>(s->stages), {0, 0, 0, 0, 0});
    for (const auto& device : s->devices)
      for (const Action& act : device)
        ++info.actions[static_cast<std::size_t>(act.stage)][static_cast<std::size_t>(act.kind)];
    info.schedule = std::move(s);
  } catch (const InputError& e) {
    info.error = e.what();
  }
  return info;
}

Bounds bounds(const PlanConfig& c, const std::vector<StageCost>& stages, const ScheduleInfo& info) {
  const std::vector<std::int32_t>& placement = info.schedule->placement;
  const std::size_t D = static_cast<std::size_t>(info.schedule->num_devices());
  std::vector<double> busy(D, 0.0), passes(D, 0.0);
  std::vector<std::int64_t> memory(D, 0), activations(D, 0);
  const double updates_per_step = c.kind == "pipedream" ? static_cast<double>(c.microbatches()) : 1;
  const double steps = static_cast<double>(info.schedule->steps) / updates_per_step;
  // Per device: the forwards, and the backwards (B or I), of the stages below its lowest (DualPipe:
  // in whichever of its two copies has fewer there; each copy's chain starts again).
  std::vector<double> head(D, -1.0), tail(D, 0.0);
  double forwards_below = 0.0, backwards_below = 0.0;
  const std::size_t per_copy = static_cast<std::size_t>(info.schedule->stages_per_copy());
  // Overlapped pairs (dualpipev, dualpipe) hide at most each action's communication behind the
  // other's compute: what is left of each is sure.
  const bool pairs = info.pairs;
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const StageCost& k = stages[s];
    const auto& n = info.actions[s];
    const auto d = static_cast<std::size_t>(placement[s]);
    const double forward_s = k.forward_s - (pairs ? k.forward_comm_s : 0.0),
                 backward_s = k.backward_s - (pairs ? k.backward_comm_s : 0.0);
    const double forward = static_cast<double>(n[0]) * forward_s,
                 backward = static_cast<double>(n[1]) * backward_s +
                            static_cast<double>(n[2]) * k.input_grad_s;
    passes[d] += forward + backward;
    busy[d] += (forward + backward + static_cast<double>(n[3]) * k.weight_grad_s +
                static_cast<double>(n[4]) * k.update_s) /
               steps;
    if (s % per_copy == 0) forwards_below = backwards_below = 0.0;
    if (head[d] < 0) {
      head[d] = forwards_below;
      tail[d] = backwards_below;
    } else {
      head[d] = std::min(head[d], forwards_below);
      tail[d] = std::min(tail[d], backwards_below);
    }
    forwards_below += forward_s;
    backwards_below += n[2] > 0 ? k.input_grad_s : backward_s;  // DualPipe's stages mix both
    memory[d] += k.static_bytes();
    // In flight from F to W; a split backward frees part at I, so W's share is what is sure.
    const std::int64_t held =
        n[2] > 0 ? k.activation_bytes - k.input_grad_release_bytes : k.activation_bytes;
    activations[d] = std::max(activations[d], info.in_flight[s] * held);
  }
  Bounds b;
  std::int64_t largest_static = 0;
  for (std::size_t d = 0; d < D; ++d) {
    largest_static = std::max(largest_static, memory[d]);
    memory[d] += activations[d];
    // An asynchronous step is no less than the busiest device's work per step (measure()).
    double step = busy[d];
    if (!asynchronous_kind(c.kind))
      step = std::max(head[d] + busy[d], head[d] + passes[d] + tail[d]);
    b.step_s = std::max(b.step_s, step);
  }
  b.memory_bytes = *std::max_element(memory.begin(), memory.end());
  b.static_bytes = largest_static;
  return b;
}

}  // namespace paci::plan
