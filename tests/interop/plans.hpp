// Plans the interop tests emit: a preset on H100s with the degrees given, the partition as
// evaluate() would give it, not simulated (emitting reads the configuration alone).
#pragma once

#include <string>

#include "plan/evaluate/evaluate.hpp"

namespace paci::interop::test {

inline plan::PlanResult result_of(plan::PlanConfig c) {
  if (c.partition.empty()) c.partition = plan::default_partition(c);
  plan::PlanResult p;
  p.config = c;
  p.dp = c.dp();
  p.microbatches = c.microbatches();
  return p;
}

inline plan::PlanResult plan_of(const std::string& preset, const std::string& kind,
                                std::int64_t gpus, std::int32_t tp, std::int32_t pp,
                                std::int32_t chunks = 1) {
  plan::PlanConfig c;
  c.model = plan::model_preset(preset);
  c.cluster = plan::cluster_preset("h100-80gb");
  c.gpus = gpus;
  c.global_batch = 512;
  c.tp = tp;
  c.pp = pp;
  c.chunks = chunks;
  c.microbatch_size = 1;
  c.kind = kind;
  c.recompute = plan::Recompute::full;
  c.sequence_parallel = tp > 1;
  c.overlap_grad_reduce = c.dp() > 1;
  c.zero = c.dp() > 1 ? 1 : 0;
  return result_of(c);
}

}  // namespace paci::interop::test
