// Test-only helpers shared by the model tests: a batch, test weights, one micro-batch run through
// stages chained as a pipeline would chain them, and a bitwise comparison of two such runs.
#pragma once

#include <cstdint>
#include <vector>

#include "model/stage.hpp"

namespace paci::model::stage_runs {

struct Batch {
  std::vector<std::int32_t> tokens, targets;
};
Batch make_batch(const StageShape& shape, std::uint64_t seed);

// A mixture of experts of `layers` blocks: 4 experts of width 24, top-2, a shared expert,
// capacity 1.0; 4 sequences of 33 tokens (132 rows, 264 assignments: experts of 40-90 rows, some
// dropped).
StageShape capacity_moe(std::size_t layers);

// GPT-2 init plus noise on LayerNorms and biases, so that no gradient path is trivially zero.
std::vector<float> make_params(const ParamLayout& layout, std::uint64_t seed);

struct Result {
  float loss = 0;
  std::vector<float> aux_losses;  // each block's load-balancing loss (MoE), in block order
  std::vector<float> grads;       // whole-model layout
};

// Runs one micro-batch through stages with the given block counts (summing to L), chained as a
// pipeline would: outputs copied forward, input gradients copied backward.
// split: every stage's backward as Zero Bubble's I (all stages, last to first), then its W.
Result run_pipeline(const StageShape& whole, const std::vector<float>& params, const Batch& batch,
                    const std::vector<std::size_t>& blocks, std::size_t threads = 1,
                    float loss_scale = 1.0f, bool split = false);

// Analytic float gradients (one stage, params and batch from the seeds) against central
// differences of the double model (h = 1e-4: truncation and rounding of the difference ~1e-11),
// four coordinates of every tensor (wte's on rows the batch uses). The loss is a mean over the
// batch's positions, so gradients are small (1e-5..1e-2); float rounding measured ≤ 1e-8 absolute.
// atol 1e-7 + rtol 1e-4 keeps a 10× margin and still fails on any wrong term.
void expect_gradients_match_differences(const StageShape& shape, std::uint64_t params_seed,
                                        std::uint64_t batch_seed);

// Loss, load-balancing losses and every gradient bit for bit.
void expect_bitwise(const Result& a, const Result& b);

}  // namespace paci::model::stage_runs
