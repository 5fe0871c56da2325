// Tests of model/optimizer.hpp: AdamW against hand-computed updates (bias correction, decay on
// 2-D tensors only, gradient scale), LR schedule values at warm-up, cosine and floor, and the
// gradient-norm utilities.
#include "model/optimizer.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace paci::model {
namespace {

const GptConfig kTiny{.layers = 1, .heads = 1, .d_model = 4, .max_seq_len = 3, .vocab = 5};

// Every parameter 1, every gradient the same: after each step a decaying tensor holds one value
// and a non-decaying tensor another, both computed by hand below.
TEST(AdamW, MatchesHandComputedSteps) {
  const ParamLayout layout(kTiny, whole_model(kTiny));
  std::vector<float> params(layout.size(), 1.0f), grads(layout.size(), 0.5f);
  AdamW adamw(layout, {.beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1});
  auto expect_all = [&](float decayed, float plain) {
    for (const ParamTensor& t : layout.tensors()) {
      const float want = t.decays() ? decayed : plain;
      for (std::size_t i = 0; i < t.numel; ++i) {
        ASSERT_NEAR(params[t.offset + i], want, 2e-7) << t.name;
      }
    }
  };
  // Step 1, lr 0.1, g 0.5: m = 0.05, v = 0.0125, m̂ = 0.5, v̂ = 0.25, update 0.1·0.5/0.5 = 0.1.
  // Decayed first: 1·(1 − 0.1·0.1) = 0.99, then 0.99 − 0.1 = 0.89. Not decayed: 1 − 0.1 = 0.9.
  adamw.step(params, grads, 0.1);
  expect_all(0.89f, 0.9f);
  // Step 2, g −0.25: m = 0.045 − 0.025 = 0.02, v = 0.011875 + 0.003125 = 0.015,
  // step size 0.1/(1 − 0.81) = 0.526315789, denom √0.015/√0.0975 = 0.392232270,
  // update 0.526315789·0.02/0.392232270 = 0.026836953.
  // Decayed: 0.89·0.99 − 0.026836953 = 0.854263047. Not decayed: 0.9 − 0.026836953 = 0.873163047.
  std::fill(grads.begin(), grads.end(), -0.25f);
  adamw.step(params, grads, 0.1);
  expect_all(0.854263047f, 0.873163047f);
  EXPECT_EQ(adamw.steps(), 2u);
}

TEST(AdamW, GradScaleEqualsScaledGradients) {
  const ParamLayout layout(kTiny, whole_model(kTiny));
  std::vector<float> a(layout.size(), 0.3f), b = a, grads(layout.size());
  for (std::size_t i = 0; i < grads.size(); ++i) grads[i] = 0.01f * static_cast<float>(i % 17);
  std::vector<float> halved = grads;
  scale(halved, 0.5f);
  AdamW one(layout), two(layout);
  for (int k = 0; k < 3; ++k) {
    one.step(a, grads, 1e-3, 0.5f);
    two.step(b, halved, 1e-3);
  }
  EXPECT_EQ(a, b);
}

TEST(LrSchedule, WarmupCosineFloorAndConstant) {
  LrSchedule lr{.max_lr = 1e-3, .min_lr = 1e-4, .warmup_steps = 10, .total_steps = 110};
  EXPECT_DOUBLE_EQ(lr.at(0), 1e-4);  // (0 + 1)/10 of max
  EXPECT_DOUBLE_EQ(lr.at(4), 5e-4);
  EXPECT_DOUBLE_EQ(lr.at(9), 1e-3);
  EXPECT_DOUBLE_EQ(lr.at(10), 1e-3);                 // cosine starts at the peak
  EXPECT_NEAR(lr.at(60), 1e-4 + 0.5 * 9e-4, 1e-15);  // half way: the mean of peak and floor
  EXPECT_NEAR(lr.at(35), 1e-4 + 0.5 * (1 + std::cos(M_PI / 4)) * 9e-4, 1e-15);
  EXPECT_DOUBLE_EQ(lr.at(110), 1e-4);  // floor from total_steps on
  EXPECT_DOUBLE_EQ(lr.at(1000), 1e-4);
  for (std::size_t s = 10; s < 110; ++s) EXPECT_GE(lr.at(s), lr.at(s + 1));
  lr.decay = LrDecay::constant;
  EXPECT_DOUBLE_EQ(lr.at(5), 6e-4);
  EXPECT_DOUBLE_EQ(lr.at(1000), 1e-3);
}

TEST(GradUtils, NormClipScaleZero) {
  std::vector<float> g{3.0f, -4.0f, 0.0f, 12.0f, 0.5f};
  EXPECT_DOUBLE_EQ(squared_norm(g), 9 + 16 + 144 + 0.25);
  // Two stages' buffers combine into the global norm: √(169.25 + 0.75) ≈ 13.04.
  std::vector<float> other{0.5f, 0.5f, 0.5f};
  const double total = squared_norm(g) + squared_norm(other);
  EXPECT_NEAR(clip_coefficient(total, 1.0), 1.0 / (std::sqrt(170.0) + 1e-6), 1e-7);
  EXPECT_EQ(clip_coefficient(total, 100.0), 1.0f);  // never scales up
  scale(g, 2.0f);
  EXPECT_EQ(g[3], 24.0f);
  zero(g);
  EXPECT_EQ(squared_norm(g), 0.0);
}

}  // namespace
}  // namespace paci::model
