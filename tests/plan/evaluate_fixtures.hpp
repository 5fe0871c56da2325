// What the evaluation tests share: a Llama 3 70B configuration on H100s, and the check that
// evaluate() refuses a configuration in one line.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "base/errors.hpp"
#include "plan/evaluate/evaluate.hpp"

namespace paci::plan {

inline PlanConfig llama70b_on_h100() {
  PlanConfig c;
  c.model = model_preset("llama3-70b");
  c.cluster = cluster_preset("h100-80gb");
  c.gpus = 64;
  c.global_batch = 512;
  c.tp = 8;
  c.pp = 4;
  c.microbatch_size = 1;
  c.kind = "1f1b";
  c.recompute = Recompute::selective;
  return c;
}

// One layer on t GPUs of a node with sequence parallelism.
inline LayerRun sequence_parallel_run(std::int64_t t) {
  LayerRun r;
  r.tensor_parallel = t;
  r.tp_ranks_per_node = t;
  r.sequence_parallel = true;
  return r;
}

// evaluate() refuses `bad` with a message holding `fragment`.
inline void refused(const PlanConfig& bad, const std::string& fragment) {
  try {
    evaluate(bad);
    ADD_FAILURE() << "accepted: " << fragment;
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr(fragment));
  }
}

}  // namespace paci::plan
