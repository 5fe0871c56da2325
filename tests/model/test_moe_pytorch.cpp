// paci's mixture-of-experts GPT against PyTorch on the same weights and batch
// (tests/golden/moe_reference.bin, written by scripts/make_moe_fixture.py, which documents the
// model and the layout): two cases, dropless with a shared expert and capacity 1.0 with
// assignments dropped. Logits, the cross-entropy, the load-balancing loss and every gradient of
// their sum, and the losses of 10 AdamW steps.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "model/optimizer.hpp"
#include "model/stage.hpp"
#include "reference.hpp"

namespace paci::model {
namespace {

using reference::all_close;
using reference::FixtureReader;

constexpr std::int32_t kMagic = 20261205;
constexpr std::int32_t kVersion = 1;

struct Case {
  GptConfig config;
  std::size_t batch = 0, seq_len = 0, steps = 0;
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0;
  std::vector<float> params, logits, grads, step_losses;
  std::vector<std::int32_t> tokens, targets;
  float loss = 0, aux = 0;
};

std::vector<Case> load(const std::string& path) {
  FixtureReader r(path);
  const auto head = r.read<std::int32_t>(3);
  if (head[0] != kMagic) throw std::runtime_error("bad magic, expected 20261205");
  if (head[1] != kVersion) throw std::runtime_error("fixture version " + std::to_string(head[1]));
  auto size = [](std::int32_t v) { return static_cast<std::size_t>(v); };
  std::vector<Case> cases(size(head[2]));
  for (Case& c : cases) {
    const auto ints = r.read<std::int32_t>(12);
    c.config = {size(ints[0]), size(ints[1]), size(ints[2]), size(ints[3]), size(ints[4])};
    c.batch = size(ints[5]);
    c.seq_len = size(ints[6]);
    c.steps = size(ints[7]);
    const auto reals = r.read<double>(7);
    c.config.moe = {.experts = size(ints[8]),
                    .top_k = size(ints[9]),
                    .hidden = size(ints[10]),
                    .shared_expert = ints[11] != 0,
                    .capacity_factor = reals[0],
                    .aux_loss_coef = reals[1]};
    c.lr = reals[2], c.beta1 = reals[3], c.beta2 = reals[4], c.eps = reals[5];
    c.weight_decay = reals[6];
    const auto P = size(r.one<std::int32_t>());
    const std::size_t R = c.batch * c.seq_len;
    c.params = r.read<float>(P);
    c.tokens = r.read<std::int32_t>(R);
    c.targets = r.read<std::int32_t>(R);
    c.logits = r.read<float>(R * c.config.vocab);
    c.loss = r.one<float>();
    c.aux = r.one<float>();
    c.grads = r.read<float>(P);
    c.step_losses = r.read<float>(c.steps);
  }
  if (!r.at_end()) throw std::runtime_error("fixture has trailing bytes");
  return cases;
}

class MoePyTorch : public ::testing::Test {
 protected:
  void SetUp() override { cases = load(std::string(PACI_GOLDEN_DIR) + "/moe_reference.bin"); }
  static StageShape shape(const Case& c) {
    return {c.config, whole_model(c.config), c.batch, c.seq_len};
  }
  std::vector<Case> cases;
};

TEST_F(MoePyTorch, LogitsLossesAndEveryGradient) {
  ASSERT_EQ(cases.size(), 2u);
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::PrintToString(c.config.moe.capacity_factor));
    Stage stage(shape(c));
    ASSERT_EQ(stage.layout().size(), c.params.size());
    ActivationSlot slot = stage.make_slot();
    const float loss =
        stage.forward_loss(c.params, StageInput::tokens(c.tokens), c.targets, 1.0f, slot);
    std::vector<float> grads(c.params.size(), 0.0f);
    stage.backward(c.params, grads, slot, {}, {});
    // float32 on both sides in different orders (OpenBLAS and paci's exp against ATen's): the
    // dense fixture's bounds (test_pytorch_fixture.cpp), which keep a 10x margin there.
    EXPECT_NEAR(loss, c.loss, 1e-5);
    EXPECT_NEAR(slot.aux_loss(), c.aux, 1e-6);
    EXPECT_TRUE(
        all_close(stage.logits(), std::span<const float>(c.logits), {1e-6, 1e-5}, "logits"));
    for (const ParamTensor& t : stage.layout().tensors()) {
      std::span<const float> got(grads.data() + t.offset, t.numel);
      std::span<const float> want(c.grads.data() + t.offset, t.numel);
      EXPECT_TRUE(all_close(got, want, {2e-7, 1e-4}, t.name));
    }
  }
}

TEST_F(MoePyTorch, TenAdamWStepsGiveTheSameLosses) {
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::PrintToString(c.config.moe.capacity_factor));
    Stage stage(shape(c));
    ActivationSlot slot = stage.make_slot();
    AdamW adamw(stage.layout(),
                {.beta1 = c.beta1, .beta2 = c.beta2, .eps = c.eps, .weight_decay = c.weight_decay});
    std::vector<float> params = c.params, grads(params.size());
    for (std::size_t k = 0; k < c.steps; ++k) {
      const float loss =
          stage.forward_loss(params, StageInput::tokens(c.tokens), c.targets, 1.0f, slot);
      EXPECT_NEAR(loss, c.step_losses[k], 1e-4) << "step " << k;
      zero(grads);
      stage.backward(params, grads, slot, {}, {});
      adamw.step(params, grads, c.lr);
    }
    EXPECT_LT(c.step_losses.back(), c.step_losses.front() - 0.1);  // it does learn
  }
}

}  // namespace
}  // namespace paci::model
