// Tests of model/stage.hpp on whole models: a finite-difference gradient check of every tensor,
// stages 0..P−1 chained giving bitwise the one-stage loss and gradients, 1 vs 2 threads bitwise,
// backward reading the weights it is given (PACI), and clear errors on bad input.
#include "model/stage.hpp"

#include <gtest/gtest.h>

#include <cstring>

#include "model/check.hpp"
#include "model/init.hpp"
#include "reference.hpp"
#include "stage_runs.hpp"

namespace paci::model {
namespace {

using namespace reference;
using namespace stage_runs;

StageShape tiny_shape() {
  StageShape shape;
  shape.config = {.layers = 2, .heads = 2, .d_model = 16, .max_seq_len = 8, .vocab = 256};
  shape.range = whole_model(shape.config);
  shape.batch = 2;
  shape.seq_len = 8;
  return shape;
}

TEST(Gpt, ForwardMatchesDoubleReference) {
  const StageShape shape = tiny_shape();
  const ParamLayout layout(shape.config, shape.range);
  const auto params = make_params(layout, 1);
  const Batch batch = make_batch(shape, 2);
  Stage stage(shape);
  ActivationSlot slot = stage.make_slot();
  const float loss =
      stage.forward_loss(params, StageInput::tokens(batch.tokens), batch.targets, 1.0f, slot);
  Vec logits;
  const double expected = gpt_loss(shape.config, layout, to_double(params), batch.tokens,
                                   batch.targets, shape.batch, shape.seq_len, &logits);
  EXPECT_NEAR(loss, expected, 1e-5);
  EXPECT_TRUE(all_close(stage.logits(), std::span<const double>(logits), {1e-6, 1e-5}, "logits"));
}

// Every tensor's gradient against central differences of the double model (stage_runs.hpp says
// how; 16 positions and 256 classes here).
TEST(Gpt, WholeModelGradientCheck) {
  expect_gradients_match_differences(tiny_shape(), 3, 4);
}

StageShape split_shape() {
  StageShape shape;
  shape.config = {.layers = 4, .heads = 4, .d_model = 32, .max_seq_len = 40, .vocab = 256};
  shape.range = whole_model(shape.config);
  shape.batch = 4;
  shape.seq_len = 33;  // 132 rows: GEMMs split into several chunks, attention into 2 blocks
  return shape;
}

TEST(Gpt, ChainedStagesEqualOneStageBitwise) {
  const StageShape shape = split_shape();
  const ParamLayout layout(shape.config, shape.range);
  const auto params = make_params(layout, 7);
  const Batch batch = make_batch(shape, 8);
  const Result whole = run_pipeline(shape, params, batch, {4}, 1, 0.25f);
  for (const auto& blocks :
       std::vector<std::vector<std::size_t>>{{2, 2}, {1, 3}, {3, 1}, {1, 1, 1, 1}, {1, 2, 1}}) {
    SCOPED_TRACE(::testing::PrintToString(blocks));
    expect_bitwise(run_pipeline(shape, params, batch, blocks, 1, 0.25f), whole);
  }
}

TEST(Gpt, OneAndTwoThreadsAreBitwiseEqual) {
  // Bitwise by construction: rows are split among threads but each row (and each GEMM chunk,
  // fixed by the shape) is computed by one thread in one order; cross-row sums run in row order.
  const StageShape shape = split_shape();
  const ParamLayout layout(shape.config, shape.range);
  const auto params = make_params(layout, 9);
  const Batch batch = make_batch(shape, 10);
  const Result one = run_pipeline(shape, params, batch, {4}, 1);
  expect_bitwise(run_pipeline(shape, params, batch, {4}, 2), one);
  expect_bitwise(run_pipeline(shape, params, batch, {2, 2}, 2), one);
  expect_bitwise(run_pipeline(shape, params, batch, {4}, 1), one);  // and run-to-run
}

// Zero Bubble's split backward: the input half through every stage first, the weight half later,
// adds exactly what the fused backward adds (the same operations on the same data).
TEST(Gpt, SplitBackwardEqualsTheFusedOneBitwise) {
  const StageShape shape = split_shape();
  const ParamLayout layout(shape.config, shape.range);
  const auto params = make_params(layout, 11);
  const Batch batch = make_batch(shape, 12);
  for (const auto& blocks :
       std::vector<std::vector<std::size_t>>{{4}, {2, 2}, {1, 3}, {3, 1}, {1, 1, 1, 1}}) {
    SCOPED_TRACE(::testing::PrintToString(blocks));
    for (std::size_t threads : {1, 2})
      expect_bitwise(run_pipeline(shape, params, batch, blocks, threads, 0.5f, true),
                     run_pipeline(shape, params, batch, blocks, threads, 0.5f));
  }
  Stage stage(shape);
  ActivationSlot slot = stage.make_slot();
  WeightGradStash stash = stage.make_weight_stash();
  std::vector<float> grads(layout.size());
  EXPECT_THROW(stage.backward_weight(grads, slot, stash), ModelError);  // no I before it
}

TEST(Gpt, BackwardReadsTheWeightsItIsGiven) {
  // PACI: forward with version 0, backward with version 1. Input gradients follow the weights
  // given to backward; weight gradients come from the saved activations only.
  StageShape shape = split_shape();
  shape.range = {2, 2};  // the last stage of two: it has a loss and returns an input gradient
  const ParamLayout layout(shape.config, shape.range);
  const auto v0 = make_params(layout, 11);
  auto v1 = v0;
  for (float& p : v1) p *= 1.01f;
  Stage stage(shape);
  ActivationSlot slot = stage.make_slot();
  const auto x = to_float(random_vec(shape.rows() * shape.config.d_model, 12));
  const auto targets = random_ids(shape.rows(), 256, 13);
  auto backward = [&](const std::vector<float>& version, std::vector<float>& grads) {
    stage.forward_loss(v0, StageInput::activations(x), targets, 1.0f, slot);
    std::vector<float> dx(x.size());
    grads.assign(layout.size(), 0.0f);
    stage.backward(version, grads, slot, {}, dx);
    return dx;
  };
  std::vector<float> g0, g1;
  const auto dx0 = backward(v0, g0);
  const auto dx1 = backward(v1, g1);
  EXPECT_NE(dx0, dx1);
  const ParamTensor& head = layout.tensor("lm_head.weight");  // dW = dlogitsᵀ·ln_f(x): v0's ln_f
  EXPECT_EQ(std::memcmp(g0.data() + head.offset, g1.data() + head.offset, head.numel * 4), 0);
}

TEST(Gpt, ErrorsNameTheProblem) {
  const StageShape shape = tiny_shape();
  Stage stage(shape);
  ActivationSlot slot = stage.make_slot();
  const ParamLayout& layout = stage.layout();
  std::vector<float> params(layout.size(), 0.0f), grads(layout.size(), 0.0f);
  Batch batch = make_batch(shape, 1);
  auto message = [](auto&& call) {
    try {
      call();
    } catch (const ModelError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([&] { stage.backward(params, grads, slot, {}, {}); }).find("holds no forward"),
            std::string::npos);
  Batch bad = batch;
  bad.tokens[5] = 256;
  EXPECT_NE(message([&] {
              stage.forward_loss(params, StageInput::tokens(bad.tokens), bad.targets, 1, slot);
            }).find("token id 256 at position 5"),
            std::string::npos);
  std::vector<float> short_params(10);
  EXPECT_NE(message([&] {
              stage.forward_loss(short_params, StageInput::tokens(batch.tokens), batch.targets, 1,
                                 slot);
            }).find("parameter buffer has 10 floats"),
            std::string::npos);
  EXPECT_NE(message([&] {
              stage.forward(params, StageInput::tokens(batch.tokens), slot);
            }).find("call forward_loss"),
            std::string::npos);
  StageShape too_long = shape;
  too_long.seq_len = 9;
  EXPECT_NE(message([&] { Stage s(too_long); }).find("sequence length 9"), std::string::npos);
  StageShape other = shape;
  other.batch = 3;
  ActivationSlot wrong = Stage(other).make_slot();
  EXPECT_NE(message([&] {
              stage.forward_loss(params, StageInput::tokens(batch.tokens), batch.targets, 1, wrong);
            }).find("another stage shape"),
            std::string::npos);
}

}  // namespace
}  // namespace paci::model
