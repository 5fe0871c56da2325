// Tests of model/layout.hpp, model/init.hpp and model/activations.hpp: GPT-2 tensor names and
// parameter counts, stage buffers as exact slices of the whole model's, stage-wise init bitwise
// equal to whole-model init with GPT-2's statistics, and the activation slot pool.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "model/activations.hpp"
#include "model/check.hpp"
#include "model/init.hpp"
#include "model/layout.hpp"

namespace paci::model {
namespace {

TEST(Layout, Gpt2SmallParameterCount) {
  const GptConfig gpt2{
      .layers = 12, .heads = 12, .d_model = 768, .max_seq_len = 1024, .vocab = 50257};
  const ParamLayout layout(gpt2, whole_model(gpt2));
  // 124,439,808 for GPT-2 small with a tied head; the untied head adds V·C = 38,597,376.
  EXPECT_EQ(layout.size(), 124439808u + 38597376u);
  EXPECT_EQ(layout.tensors().size(), 2u + 12 * 12 + 3);
  EXPECT_EQ(layout.tensor("h.11.mlp.c_proj.weight").shape, (std::vector<std::size_t>{768, 3072}));
  EXPECT_TRUE(layout.tensor("h.0.attn.c_attn.weight").decays());
  EXPECT_FALSE(layout.tensor("h.0.attn.c_attn.bias").decays());
  EXPECT_FALSE(layout.tensor("ln_f.weight").decays());
  EXPECT_TRUE(layout.tensor("wpe").decays());
}

TEST(Layout, StagesAreSlicesOfTheWholeModel) {
  const GptConfig config{.layers = 5, .heads = 2, .d_model = 8, .max_seq_len = 6, .vocab = 11};
  const ParamLayout whole(config, whole_model(config));
  for (const auto& blocks : std::vector<std::vector<std::size_t>>{{5}, {2, 3}, {1, 1, 1, 1, 1}}) {
    std::size_t first = 0, next_offset = 0, tensors = 0;
    for (std::size_t n : blocks) {
      const ParamLayout stage(config, {first, n});
      EXPECT_EQ(stage.model_offset(), next_offset);
      for (const ParamTensor& t : stage.tensors()) {
        const ParamTensor& w = whole.tensor(t.name);
        EXPECT_EQ(w.offset, stage.model_offset() + t.offset) << t.name;
        EXPECT_EQ(w.shape, t.shape) << t.name;
        ++tensors;
      }
      EXPECT_EQ(stage.contains("wte"), first == 0);
      EXPECT_EQ(stage.contains("lm_head.weight"), first + n == 5);
      next_offset += stage.size();
      first += n;
    }
    EXPECT_EQ(next_offset, whole.size());
    EXPECT_EQ(tensors, whole.tensors().size());
  }
}

TEST(Layout, RejectsBadShapes) {
  const GptConfig config{.layers = 2, .heads = 3, .d_model = 8, .max_seq_len = 4, .vocab = 5};
  EXPECT_THROW(ParamLayout(config, {0, 2}), ModelError);  // 8 channels, 3 heads
  const GptConfig ok{.layers = 2, .heads = 2, .d_model = 8, .max_seq_len = 4, .vocab = 5};
  EXPECT_THROW(ParamLayout(ok, {1, 2}), ModelError);  // leaves the model
  EXPECT_THROW(ParamLayout(ok, {1, 0}), ModelError);  // empty middle stage
  EXPECT_THROW(ParamLayout(ok, {0, 1}).lm_head(), ModelError);
  EXPECT_THROW(ParamLayout(ok, {0, 1}).tensor("h.1.ln_1.weight"), ModelError);
}

TEST(Init, StageWiseInitEqualsWholeModelInit) {
  const GptConfig config{.layers = 4, .heads = 2, .d_model = 16, .max_seq_len = 8, .vocab = 32};
  const ParamLayout whole(config, whole_model(config));
  std::vector<float> all(whole.size());
  init_gpt2(whole, all, 42);
  for (std::size_t first = 0; first < 4; ++first) {
    const ParamLayout stage(config, {first, 1});
    std::vector<float> part(stage.size());
    init_gpt2(stage, part, 42);
    EXPECT_EQ(std::memcmp(part.data(), all.data() + stage.model_offset(), part.size() * 4), 0);
  }
  std::vector<float> other(whole.size());
  init_gpt2(whole, other, 43);
  EXPECT_NE(other, all);
}

TEST(Init, Gpt2Statistics) {
  const GptConfig config{.layers = 8, .heads = 4, .d_model = 64, .max_seq_len = 64, .vocab = 256};
  const ParamLayout layout(config, whole_model(config));
  std::vector<float> params(layout.size());
  init_gpt2(layout, params, 1);
  auto stddev = [&](const std::string& name) {
    const ParamTensor& t = layout.tensor(name);
    double sum = 0, sq = 0;
    for (std::size_t i = 0; i < t.numel; ++i) {
      sum += params[t.offset + i];
      sq += static_cast<double>(params[t.offset + i]) * params[t.offset + i];
    }
    const double mean = sum / static_cast<double>(t.numel);
    EXPECT_NEAR(mean, 0.0, 0.002) << name;
    return std::sqrt(sq / static_cast<double>(t.numel) - mean * mean);
  };
  EXPECT_NEAR(stddev("wte"), 0.02, 0.001);
  EXPECT_NEAR(stddev("wpe"), 0.02, 0.001);
  EXPECT_NEAR(stddev("lm_head.weight"), 0.02, 0.001);
  EXPECT_NEAR(stddev("h.3.mlp.c_fc.weight"), 0.02, 0.001);
  EXPECT_NEAR(stddev("h.3.attn.c_proj.weight"), 0.02 / 4.0, 0.0005);  // 1/√(2·8) = 1/4
  EXPECT_NEAR(stddev("h.7.mlp.c_proj.weight"), 0.02 / 4.0, 0.0005);
  for (const char* name : {"h.0.ln_1.weight", "ln_f.weight"}) {
    const ParamTensor& t = layout.tensor(name);
    for (std::size_t i = 0; i < t.numel; ++i) ASSERT_EQ(params[t.offset + i], 1.0f) << name;
  }
  for (const char* name : {"h.0.ln_1.bias", "h.2.attn.c_attn.bias", "h.5.mlp.c_proj.bias"}) {
    const ParamTensor& t = layout.tensor(name);
    for (std::size_t i = 0; i < t.numel; ++i) ASSERT_EQ(params[t.offset + i], 0.0f) << name;
  }
}

TEST(Activations, SlotBytesFollowTheFormula) {
  StageShape shape;
  shape.config = {.layers = 4, .heads = 4, .d_model = 128, .max_seq_len = 128, .vocab = 256};
  shape.batch = 16;
  shape.seq_len = 128;
  const std::size_t R = 16 * 128, C = 128, att = 16 * 4 * 128 * 128;
  const std::size_t block = (16 * R * C + 4 * R + att) * 4;
  shape.range = {1, 2};  // middle: input + 2 blocks
  EXPECT_EQ(ActivationSlot::bytes_for(shape), R * C * 4 + 2 * block);
  EXPECT_EQ(ActivationSlot(shape).bytes(), ActivationSlot::bytes_for(shape));
  shape.range = {0, 4};  // whole model: + token ids, targets, ln_f, probabilities, losses
  EXPECT_EQ(ActivationSlot::bytes_for(shape),
            R * C * 4 + 4 * block + (R * C + 3 * R + R * 256) * 4 + 2 * R * 4);
  EXPECT_EQ(ActivationSlot(shape).bytes(), ActivationSlot::bytes_for(shape));
}

TEST(Activations, StoreKeysSlotsByMicrobatch) {
  StageShape shape;
  shape.config = {.layers = 2, .heads = 1, .d_model = 4, .max_seq_len = 4, .vocab = 7};
  shape.range = {0, 1};
  shape.batch = 1;
  shape.seq_len = 4;
  ActivationStore store(shape, 2);
  ActivationSlot& a = store.acquire(5);
  ActivationSlot& b = store.acquire(6);
  EXPECT_NE(&a, &b);
  EXPECT_EQ(&store.at(5), &a);
  EXPECT_THROW(store.acquire(7), ModelError);  // full
  EXPECT_THROW(store.acquire(6), ModelError);  // already held
  store.release(5);
  EXPECT_FALSE(store.contains(5));
  EXPECT_THROW(store.at(5), ModelError);
  EXPECT_EQ(&store.acquire(7), &a);  // the freed slot is reused, nothing allocated
  EXPECT_EQ(store.in_use(), 2u);
  EXPECT_EQ(store.peak_in_use(), 2u);
  EXPECT_EQ(store.slot_bytes(), ActivationSlot::bytes_for(shape));
  EXPECT_THROW(store.release(9), ModelError);
}

}  // namespace
}  // namespace paci::model
