// The mixture-of-experts GPT (model/config.hpp, MoeConfig) on whole models: its layout and slot
// sizes from their formulas, the forward and every gradient (the load-balancing loss's included)
// against the double reference and central differences, capacity dropping, and the bitwise
// properties the executors rely on: stages chained, 1 vs 2 threads, the split backward.
#include <gtest/gtest.h>

#include <cstring>

#include "model/activations.hpp"
#include "model/check.hpp"
#include "model/init.hpp"
#include "model/layout.hpp"
#include "model/stage.hpp"
#include "reference.hpp"
#include "stage_runs.hpp"

namespace paci::model {
namespace {

using namespace reference;
using namespace stage_runs;

// E = 4 experts of width 12, top-2, a shared expert, dropless; the loss coefficient is 0.1 so
// that its gradient is not lost beside the cross-entropy's in the checks below.
StageShape tiny_moe(MoeConfig moe = {.experts = 4,
                                     .top_k = 2,
                                     .hidden = 12,
                                     .shared_expert = true,
                                     .capacity_factor = 0,
                                     .aux_loss_coef = 0.1}) {
  StageShape shape;
  shape.config = {.layers = 2, .heads = 2, .d_model = 16, .max_seq_len = 8, .vocab = 64};
  shape.config.moe = moe;
  shape.range = whole_model(shape.config);
  shape.batch = 2;
  shape.seq_len = 8;
  return shape;
}

// The three routings the checks cover: dropless with a shared expert; capacity 0.5 (each expert
// takes ceil(0.5·16·2/4) = 4 of the 32 assignments: half of them dropped); top-1 of 3 (every
// gate is 1: the router learns from the load-balancing loss alone).
std::vector<StageShape> routings() {
  return {
      tiny_moe(),
      tiny_moe(
          {.experts = 4, .top_k = 2, .hidden = 12, .capacity_factor = 0.5, .aux_loss_coef = 0.1}),
      tiny_moe({.experts = 3, .top_k = 1, .hidden = 8, .aux_loss_coef = 0.1})};
}

TEST(Moe, LayoutNamesAndCountsTheExperts) {
  const StageShape shape = tiny_moe();
  const ParamLayout layout(shape.config, shape.range);
  const std::size_t C = 16, H = 12, E = 4;
  // attention 4C² + 4C, LayerNorms 4C, router E·C, 4 experts and the shared one: 3·H·C each
  const std::size_t block = 4 * C * C + 8 * C + E * C + 5 * 3 * H * C;
  EXPECT_EQ(block_floats(shape.config), block);
  EXPECT_EQ(layout.size(), (64 + 8) * C + 2 * block + 2 * C + 64 * C);
  EXPECT_EQ(layout.tensor("h.1.moe.router.weight").shape, (std::vector<std::size_t>{E, C}));
  EXPECT_EQ(layout.tensor("h.0.moe.experts.3.w2.weight").shape, (std::vector<std::size_t>{C, H}));
  EXPECT_EQ(layout.tensor("h.0.moe.shared.w3.weight").shape, (std::vector<std::size_t>{H, C}));
  EXPECT_FALSE(layout.contains("h.0.mlp.c_fc.weight"));
  EXPECT_EQ(layout.tensor("h.0.moe.experts.1.w1.weight").offset,
            layout.block(0).experts + expert_floats(shape.config));
  // Stages are slices of the whole model's buffer, as for the dense model.
  const ParamLayout second(shape.config, {1, 1});
  EXPECT_EQ(second.model_offset() + second.tensor("h.1.moe.shared.w2.weight").offset,
            layout.tensor("h.1.moe.shared.w2.weight").offset);
}

TEST(Moe, SlotBytesFollowTheFormula) {
  StageShape shape = tiny_moe();
  shape.range = {0, 1};  // the first stage of two: its input, one block, the token ids
  const std::size_t R = 16, C = 16, T = 8, E = 4, K = 2, H = 12, N = R * K;
  // ln1, qkv (3), atty, residual2, ln2; four row statistics; the scores (B·NH·T·T)
  const std::size_t attention = 7 * R * C + 4 * R + 2 * 2 * T * T;
  const std::size_t moe = R * E + R * K + 2 * N * C + 3 * N * H + 3 * R * H + 1;
  const std::size_t ids = 2 * N + (E + 1) + E;
  EXPECT_EQ(ActivationSlot::bytes_for(shape),
            (R * C + attention + moe + R * C) * 4 + ids * 4 + R * 4 /* tokens */);
  EXPECT_EQ(ActivationSlot(shape).bytes(), ActivationSlot::bytes_for(shape));
}

TEST(Moe, ForwardMatchesDoubleReference) {
  for (const StageShape& shape : routings()) {
    SCOPED_TRACE(::testing::PrintToString(shape.config.moe.capacity_factor));
    const ParamLayout layout(shape.config, shape.range);
    const auto params = make_params(layout, 1);
    const Batch batch = make_batch(shape, 2);
    Stage stage(shape);
    ActivationSlot slot = stage.make_slot();
    const float loss =
        stage.forward_loss(params, StageInput::tokens(batch.tokens), batch.targets, 1.0f, slot);
    Vec logits;
    double aux = 0;
    const double total = gpt_loss(shape.config, layout, to_double(params), batch.tokens,
                                  batch.targets, shape.batch, shape.seq_len, &logits, &aux);
    EXPECT_NEAR(loss, total - aux, 1e-5);
    EXPECT_NEAR(slot.aux_loss(), aux, 1e-6);
    EXPECT_GT(aux, 0.05);  // α·E·Σ f·P is about α for a balanced router
    EXPECT_TRUE(all_close(stage.logits(), std::span<const double>(logits), {1e-6, 1e-5}, "logits"));
  }
}

// Central differences of the double model (cross-entropy plus load-balancing losses), four
// coordinates per tensor, as the dense check: the routing is piecewise constant, and h = 1e-4
// moves no router probability across another for these weights (a crossing would show as a
// gradient off by orders of magnitude, not within the tolerance).
TEST(Moe, WholeModelGradientCheck) {
  for (const StageShape& shape : routings()) {
    SCOPED_TRACE(::testing::PrintToString(shape.config.moe.capacity_factor));
    expect_gradients_match_differences(shape, 3, 4);
  }
}

TEST(Moe, CapacityDropsWhatIsOverItAndNothingElse) {
  const StageShape dropless = tiny_moe();
  const ParamLayout layout(dropless.config, dropless.range);
  const auto params = make_params(layout, 6);
  const Batch batch = make_batch(dropless, 7);
  const Result all = run_pipeline(dropless, params, batch, {2});
  StageShape roomy = dropless;
  roomy.config.moe.capacity_factor = 2.0;  // ceil(2·32/4) = 16 = R: no expert can be over it
  expect_bitwise(run_pipeline(roomy, params, batch, {2}), all);
  StageShape tight = dropless;
  tight.config.moe.capacity_factor = 0.5;
  const Result dropped = run_pipeline(tight, params, batch, {2});
  EXPECT_NE(dropped.loss, all.loss);
  // The load-balancing loss counts choices before capacity: the first block's is the same either
  // way (the second block's input differs).
  EXPECT_EQ(dropped.aux_losses[0], all.aux_losses[0]);
  EXPECT_EQ(tight.config.moe.capacity(16), 4u);
  EXPECT_EQ(dropless.config.moe.capacity(16), 32u);
}

TEST(Moe, ChainedStagesThreadsAndSplitBackwardAreBitwiseEqual) {
  const StageShape shape = capacity_moe(4);
  const ParamLayout layout(shape.config, shape.range);
  const auto params = make_params(layout, 7);
  const Batch batch = make_batch(shape, 8);
  const Result whole = run_pipeline(shape, params, batch, {4}, 1, 0.25f);
  EXPECT_EQ(whole.aux_losses.size(), 4u);
  for (const auto& blocks : std::vector<std::vector<std::size_t>>{{2, 2}, {1, 3}, {1, 1, 1, 1}}) {
    SCOPED_TRACE(::testing::PrintToString(blocks));
    expect_bitwise(run_pipeline(shape, params, batch, blocks, 1, 0.25f), whole);
    expect_bitwise(run_pipeline(shape, params, batch, blocks, 2, 0.25f), whole);
    for (std::size_t threads : {1, 2})
      expect_bitwise(run_pipeline(shape, params, batch, blocks, threads, 0.25f, true), whole);
  }
  // Every stage's load-balancing gradient follows the loss scale its forward was given, as the
  // cross-entropy's does: the backward is linear in it, so a power of two scales every gradient
  // exactly (one stage scaling its loss by 1 while another by 1/4 would break this).
  const Result unscaled = run_pipeline(shape, params, batch, {2, 2}, 1, 1.0f);
  std::size_t exact = 0;
  for (std::size_t i = 0; i < whole.grads.size(); ++i)
    exact += whole.grads[i] == 0.25f * unscaled.grads[i];
  EXPECT_EQ(exact, whole.grads.size());
}

// A cut's image of a slot holds its routes; a route out of range, a row used twice or counts
// that disagree would have the backward read or write the wrong rows, so the image is refused.
TEST(Moe, ACutImageWithBadRoutesIsRefused) {
  StageShape shape = tiny_moe();
  shape.range = {0, 1};  // one block, no head: the image is floats, tokens, then the routes
  const ParamLayout layout(shape.config, shape.range);
  const auto params = make_params(layout, 9);
  const Batch batch = make_batch(shape, 10);
  ActivationStore store(shape, 1);
  Stage stage(shape);
  stage.forward(params, StageInput::tokens(batch.tokens), store.acquire(0));
  ImageWriter count;
  store.save_image(count);
  std::vector<std::byte> image(count.size());
  ImageWriter writer(image);
  store.save_image(writer);
  const auto load = [&](const std::vector<std::byte>& bytes) {
    ActivationStore other(shape, 1);
    ImageReader reader(bytes, "slot image");
    other.load_image(reader);
    reader.finish();
  };
  EXPECT_NO_THROW(load(image));
  // ids: choice (R·K), row (R·K), first_row (E+1), chosen (E); then the loss scale and the flag.
  const std::size_t R = shape.rows(), K = 2, E = 4;
  const std::size_t ids_at = image.size() - 1 - 4 - (2 * R * K + 2 * E + 1) * 4;
  const auto id = [&](std::vector<std::byte>& bytes, std::size_t i) {
    return reinterpret_cast<std::int32_t*>(bytes.data() + ids_at) + i;
  };
  std::vector<std::byte> bad = image;
  *id(bad, 0) = 4;  // expert 4 of 4
  EXPECT_THROW(load(bad), InputError);
  bad = image;
  *id(bad, 1) = *id(bad, 0);  // token 0 routed to one expert twice
  EXPECT_THROW(load(bad), InputError);
  bad = image;
  *id(bad, R * K + 1) = *id(bad, R * K);  // two assignments on one row
  EXPECT_THROW(load(bad), InputError);
  bad = image;
  *id(bad, 2 * R * K + E + 1) += 1;  // chosen[0] off by one
  EXPECT_THROW(load(bad), InputError);
}

TEST(Moe, ErrorsNameTheProblem) {
  auto message = [](const MoeConfig& moe) {
    GptConfig config{.layers = 1, .heads = 1, .d_model = 4, .max_seq_len = 4, .vocab = 8};
    config.moe = moe;
    try {
      config.validate();
    } catch (const ModelError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({.experts = 4, .top_k = 5, .hidden = 4})
                .find("top-k 5 must be between 1 and "
                      "the 4 experts"),
            std::string::npos);
  EXPECT_NE(message({.experts = 4, .top_k = 0, .hidden = 4}).find("top-k 0"), std::string::npos);
  EXPECT_NE(message({.experts = 4, .top_k = 1, .hidden = 0}).find("hidden width"),
            std::string::npos);
  EXPECT_NE(message({.experts = 4, .top_k = 1, .hidden = 4, .capacity_factor = -1})
                .find("capacity factor -1"),
            std::string::npos);
  EXPECT_EQ(message({.experts = 0, .top_k = 9}), "no error");  // dense: the MoE fields unused
}

}  // namespace
}  // namespace paci::model
