// The helpers of stage_runs.hpp.
#include "stage_runs.hpp"

#include <gtest/gtest.h>

#include <cstring>

#include "model/init.hpp"
#include "reference.hpp"

namespace paci::model::stage_runs {

using namespace reference;

Batch make_batch(const StageShape& shape, std::uint64_t seed) {
  const std::size_t R = shape.rows(), V = shape.config.vocab;
  return {random_ids(R, V, seed), random_ids(R, V, seed + 1)};
}

StageShape capacity_moe(std::size_t layers) {
  StageShape shape;
  shape.config = {.layers = layers, .heads = 4, .d_model = 32, .max_seq_len = 40, .vocab = 256};
  shape.config.moe = {
      .experts = 4, .top_k = 2, .hidden = 24, .shared_expert = true, .capacity_factor = 1.0};
  shape.range = whole_model(shape.config);
  shape.batch = 4;
  shape.seq_len = 33;
  return shape;
}

std::vector<float> make_params(const ParamLayout& layout, std::uint64_t seed) {
  std::vector<float> params(layout.size());
  init_gpt2(layout, params, seed);
  InitRng rng(seed + 99);
  for (const ParamTensor& t : layout.tensors()) {
    if (t.decays()) continue;
    for (std::size_t i = 0; i < t.numel; ++i) {
      params[t.offset + i] += static_cast<float>(0.1 * rng.normal());
    }
  }
  return params;
}

Result run_pipeline(const StageShape& whole, const std::vector<float>& params, const Batch& batch,
                    const std::vector<std::size_t>& blocks, std::size_t threads, float loss_scale,
                    bool split) {
  std::vector<Stage> stages;
  std::size_t first = 0;
  for (std::size_t n : blocks) {
    StageShape shape = whole;
    shape.range = {first, n};
    stages.emplace_back(shape, threads);
    first += n;
  }
  std::vector<ActivationSlot> slots;
  std::vector<std::span<const float>> stage_params;
  Result result;
  result.grads.assign(params.size(), 0.0f);
  std::vector<std::span<float>> stage_grads;
  for (Stage& s : stages) {
    slots.push_back(s.make_slot());
    stage_params.emplace_back(params.data() + s.layout().model_offset(), s.layout().size());
    stage_grads.emplace_back(result.grads.data() + s.layout().model_offset(), s.layout().size());
  }
  std::vector<float> message;  // the transport: one activation or gradient in flight
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const StageInput input =
        i == 0 ? StageInput::tokens(batch.tokens) : StageInput::activations(message);
    if (stages[i].is_last()) {
      result.loss =
          stages[i].forward_loss(stage_params[i], input, batch.targets, loss_scale, slots[i]);
    } else {
      auto out = stages[i].forward(stage_params[i], input, slots[i], loss_scale);
      message.assign(out.begin(), out.end());
    }
    for (std::size_t l = 0; l < stages[i].shape().range.num_layers; ++l)
      result.aux_losses.push_back(slots[i].block_aux_loss(l));
  }
  std::vector<float> d_input(whole.rows() * whole.config.d_model);
  std::vector<WeightGradStash> stashes;
  for (Stage& s : stages) stashes.push_back(s.make_weight_stash());
  for (std::size_t i = stages.size(); i-- > 0;) {
    std::span<const float> d_output = stages[i].is_last() ? std::span<const float>() : message;
    std::span<float> d_in = stages[i].is_first() ? std::span<float>() : std::span<float>(d_input);
    if (split)
      stages[i].backward_input(stage_params[i], slots[i], d_output, d_in, stashes[i]);
    else
      stages[i].backward(stage_params[i], stage_grads[i], slots[i], d_output, d_in);
    message = d_input;
  }
  if (split)
    for (std::size_t i = 0; i < stages.size(); ++i) {
      EXPECT_TRUE(stashes[i].filled());
      stages[i].backward_weight(stage_grads[i], slots[i], stashes[i]);
      EXPECT_FALSE(stashes[i].filled());
    }
  return result;
}

void expect_gradients_match_differences(const StageShape& shape, std::uint64_t params_seed,
                                        std::uint64_t batch_seed) {
  const ParamLayout layout(shape.config, shape.range);
  const auto params = make_params(layout, params_seed);
  const Batch batch = make_batch(shape, batch_seed);
  const Result analytic = run_pipeline(shape, params, batch, {shape.range.num_layers});
  Vec point = to_double(params);
  InitRng rng(5);
  for (const ParamTensor& t : layout.tensors()) {
    std::vector<float> got;
    Vec want;
    for (int k = 0; k < 4; ++k) {
      std::size_t i = t.offset + rng.next() % t.numel;
      if (t.name == "wte")
        i = t.offset + static_cast<std::size_t>(batch.tokens[k]) * shape.config.d_model + k;
      const double h = 1e-4, saved = point[i];
      point[i] = saved + h;
      const double up = gpt_loss(shape.config, layout, point, batch.tokens, batch.targets,
                                 shape.batch, shape.seq_len);
      point[i] = saved - h;
      const double down = gpt_loss(shape.config, layout, point, batch.tokens, batch.targets,
                                   shape.batch, shape.seq_len);
      point[i] = saved;
      got.push_back(analytic.grads[i]);
      want.push_back((up - down) / (2 * h));
    }
    EXPECT_TRUE(all_close(got, want, {1e-7, 1e-4}, t.name));
  }
}

void expect_bitwise(const Result& a, const Result& b) {
  EXPECT_EQ(std::memcmp(&a.loss, &b.loss, sizeof(float)), 0) << a.loss << " vs " << b.loss;
  EXPECT_EQ(a.aux_losses, b.aux_losses);
  ASSERT_EQ(a.grads.size(), b.grads.size());
  EXPECT_EQ(std::memcmp(a.grads.data(), b.grads.data(), a.grads.size() * sizeof(float)), 0);
}

}  // namespace paci::model::stage_runs
