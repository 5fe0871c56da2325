// A search's lower bounds on a configuration's step and peak memory, from its stage costs and
// what its schedule's analysis says (search.cpp simulates what they cannot rule out).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "plan/evaluate/evaluate.hpp"
#include "schedules/ir.hpp"
#include "sim/cost_model.hpp"

namespace paci::plan {

// A schedule a search simulates, generated once for every configuration that shares it, and what
// the bound needs from it: per stage the micro-batches in flight at most and its actions per kind.
struct ScheduleInfo {
  std::shared_ptr<const Schedule> schedule;
  std::vector<std::int32_t> in_flight;               // per stage, peak activations
  std::vector<std::array<std::int64_t, 5>> actions;  // per stage: F, B, I, W, U counts
  std::int32_t max_staleness = 0;
  bool pairs = false;  // overlapped F&B pairs (dualpipev, dualpipe)
  std::string error;   // the generator's refusal
};

// The configuration's schedule (generate_schedule) and its analysis; the generator's refusal in
// `error`.
ScheduleInfo schedule_info(const PlanConfig& config);

// A lower bound on the step, and one on the largest device's peak memory: its stages' static
// bytes plus, of its stages, the largest peak of in-flight activations (the stages of one device
// need not peak at once).
// The step: no device works less than its actions' durations. A flushed step also waits at both
// ends: a device's first forward needs the forwards of every stage below its lowest, and after its
// last backward (the input-gradient half, where the backward is split) the backwards of those
// stages still run; every forward and backward on the device comes between. Both are sums of the
// durations the simulation adds, in a path it must take, so the bound is never above its step.
struct Bounds {
  double step_s = 0;
  std::int64_t memory_bytes = 0;
  std::int64_t static_bytes = 0;  // of the largest device: weights, gradients, optimizer state
};

Bounds bounds(const PlanConfig& config, const std::vector<StageCost>& stages,
              const ScheduleInfo& info);

}  // namespace paci::plan
