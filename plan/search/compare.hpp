// Why one plan is faster than another: the path from a configuration a user already runs to the
// best one found, one knob at a time, each step evaluated (the fastest single change first), so
// the difference is split into what each change is worth in paci's own model.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "plan/evaluate/evaluate.hpp"
#include "traces/report.hpp"  // ordered_json

namespace paci::plan {

struct GapStep {
  std::string change;  // "pp 16 -> 8", "sequence parallelism on", ...
  PlanResult result;   // the configuration after it (its best partition unless the end's)
};

// From `from` to `to` (both evaluated; `to` a search's plan): each round applies, of the knobs
// that still differ, the one whose configuration is fastest and valid (one the evaluation accepts
// and `runnable` allows, "" from it), fitting `memory_limit_bytes` when any does; the rest at once
// when no single change is valid. The last step's configuration is `to`'s. Knobs: t, p, the kind
// with its v, b, recomputation, sequence parallelism, TP overlap, the ZeRO stage, the
// overlapped reduction, the partition. Empty when the two are the same configuration.
std::vector<GapStep> walk(const PlanResult& from, const PlanResult& to, double memory_limit_bytes,
                          const std::function<std::string(const PlanConfig&)>& runnable = {});

// The comparison for people: the launch's plan, the best, the ratio and the walk.
std::string gap_text(const PlanResult& from, const PlanResult& to,
                     const std::vector<GapStep>& steps);
// {"change", "step_s", "peak_memory_bytes", "fits", "mfu", "bubble_ratio"} per step.
ordered_json walk_json(const std::vector<GapStep>& steps);

}  // namespace paci::plan
