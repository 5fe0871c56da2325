// Whole GPU stages against model::Stage: loss, logits and every parameter gradient of a 3-block
// model run as one stage and as pipelines {1,2} and {1,1,1} (first, middle and last stages chained
// through device buffers), accumulation over micro-batches, both linear-layer paths, the backward
// split into I and W (bit for bit the fused one's), and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <utility>
#include <vector>

#include "cuda/check.hpp"
#include "cuda/stage.hpp"
#include "model/check.hpp"
#include "model/init.hpp"
#include "model/stage.hpp"
#include "support.hpp"

namespace paci::cuda {
namespace {

using testing::download;
using testing::upload;

model::StageShape whole_shape() {
  model::StageShape shape;
  shape.config = {.layers = 3, .heads = 4, .d_model = 64, .max_seq_len = 32, .vocab = 97};
  shape.range = model::whole_model(shape.config);
  shape.batch = 2;
  shape.seq_len = 24;
  return shape;
}

// GPT-2 init plus noise on LayerNorms and biases (no gradient path trivially zero), as the GPU
// computing in `precision` sees them.
std::vector<float> make_params(const model::ParamLayout& layout, Precision precision) {
  std::vector<float> params(layout.size());
  model::init_gpt2(layout, params, 7);
  model::InitRng rng(106);
  for (const model::ParamTensor& t : layout.tensors()) {
    if (t.decays()) continue;
    for (std::size_t i = 0; i < t.numel; ++i) {
      params[t.offset + i] += static_cast<float>(0.1 * rng.normal());
    }
  }
  return testing::rounded(params, precision);
}

struct Batch {
  std::vector<std::int32_t> tokens, targets;
};
Batch make_batch(const model::StageShape& shape, std::uint64_t seed) {
  return {reference::random_ids(shape.rows(), shape.config.vocab, seed),
          reference::random_ids(shape.rows(), shape.config.vocab, seed + 1)};
}

struct Result {
  std::vector<float> losses;  // per micro-batch
  std::vector<float> logits;  // of the last micro-batch
  std::vector<float> grads;   // whole-model layout, summed over the micro-batches
};

Result run_cpu(const model::StageShape& shape, const std::vector<float>& params,
               const std::vector<Batch>& batches, float loss_scale) {
  model::Stage stage(shape);
  model::ActivationSlot slot = stage.make_slot();
  Result r;
  r.grads.assign(params.size(), 0.0f);
  for (const Batch& b : batches) {
    r.losses.push_back(stage.forward_loss(params, model::StageInput::tokens(b.tokens), b.targets,
                                          loss_scale, slot));
    stage.backward(params, r.grads, slot, {}, {});
  }
  r.logits.assign(stage.logits().begin(), stage.logits().end());
  return r;
}

// The model split into stages of `blocks` blocks, chained through device buffers; each call
// waits for its stage before the next stage reads what it wrote. split: every backward is
// backward_input, and the weight halves run after the whole batch's input halves, last micro-batch
// first in each stage (as a zero-bubble schedule may defer them).
Result run_gpu(const model::StageShape& whole, const std::vector<float>& params,
               const std::vector<Batch>& batches, float loss_scale,
               const std::vector<std::size_t>& blocks, Precision precision, bool use_lt = true,
               bool split = false) {
  std::vector<Stage> stages;
  std::vector<ActivationSlot> slots;
  std::vector<std::vector<ActivationSlot>> split_slots;  // per stage, one per micro-batch
  std::vector<std::vector<WeightGradStash>> stashes;     // the same
  std::vector<DeviceTensor> weights, d_inputs;
  std::vector<DeviceBuffer<float>> grads;
  stages.reserve(blocks.size());
  std::size_t first = 0;
  const std::size_t RC = whole.rows() * whole.config.d_model;
  for (std::size_t n : blocks) {
    model::StageShape shape = whole;
    shape.range = {first, n};
    first += n;
    Stage& stage = stages.emplace_back(shape, precision);
    stage.set_use_lt(use_lt);
    slots.push_back(stage.make_slot());
    split_slots.emplace_back();
    stashes.emplace_back();
    for (std::size_t i = 0; split && i < batches.size(); ++i) {
      split_slots.back().push_back(stage.make_slot());
      stashes.back().push_back(stage.make_weight_stash());
    }
    const model::ParamLayout& layout = stage.layout();
    const auto begin = params.begin() + static_cast<std::ptrdiff_t>(layout.model_offset());
    weights.push_back(upload(
        stage.stream(),
        std::vector<float>(begin, begin + static_cast<std::ptrdiff_t>(layout.size())), precision));
    grads.push_back(upload(stage.stream(), std::vector<float>(layout.size(), 0.0f)));
    d_inputs.emplace_back(precision, stage.is_first() ? 0 : RC);
  }
  Result r;
  for (std::size_t mb = 0; mb < batches.size(); ++mb) {
    const Batch& b = batches[mb];
    const auto slot = [&](std::size_t i) -> ActivationSlot& {
      return split ? split_slots[i][mb] : slots[i];
    };
    TensorView x;
    for (std::size_t i = 0; i < stages.size(); ++i) {
      const StageInput input = i == 0 ? StageInput::tokens(b.tokens) : StageInput::activations(x);
      if (stages[i].is_last()) {
        r.losses.push_back(
            stages[i].forward_loss(weights[i].view(), input, b.targets, loss_scale, slot(i)));
      } else {
        x = stages[i].forward(weights[i].view(), input, slot(i));
      }
      stages[i].synchronize();
    }
    TensorView dy;
    for (std::size_t i = stages.size(); i-- > 0;) {
      const MutableTensorView grad_view = MutableTensorView::of(grads[i].data(), grads[i].size());
      if (split)
        stages[i].backward_input(weights[i].view(), slot(i), dy, d_inputs[i].view(),
                                 stashes[i][mb]);
      else
        stages[i].backward(weights[i].view(), grad_view, slot(i), dy, d_inputs[i].view());
      stages[i].synchronize();
      dy = std::as_const(d_inputs[i]).view();
    }
  }
  for (std::size_t i = 0; split && i < stages.size(); ++i) {
    for (std::size_t mb = batches.size(); mb-- > 0;)
      stages[i].backward_weight(MutableTensorView::of(grads[i].data(), grads[i].size()),
                                split_slots[i][mb], stashes[i][mb]);
    stages[i].synchronize();
  }
  // The logits' rows are padded (logits_ld): keep the V real columns; the padding must be zero.
  const Stage& last = stages.back();
  const std::size_t V = last.layout().config().vocab, ld = last.logits_ld();
  const std::vector<float> padded = download(last.stream(), last.logits());
  EXPECT_EQ(ld % 128, 0u);
  EXPECT_GE(ld, V);
  r.logits = testing::unpad_rows(padded, V, ld);
  EXPECT_EQ(testing::padding_of(padded, V, ld),
            std::vector<float>(padded.size() / ld * (ld - V), 0.0f))
      << "logits padding";
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const std::vector<float> g = download(stages[i].stream(), grads[i].data(), grads[i].size());
    r.grads.insert(r.grads.end(), g.begin(), g.end());
  }
  return r;
}

// Loss, logits and each tensor's gradient, bounded relative to the tensor's largest entry.
void expect_match(const Result& gpu, const Result& cpu, const model::ParamLayout& layout,
                  Precision precision) {
  const double loss_tol = precision == Precision::fp32 ? 1e-5 : 2e-2;
  ASSERT_EQ(gpu.losses.size(), cpu.losses.size());
  for (std::size_t i = 0; i < cpu.losses.size(); ++i) {
    EXPECT_NEAR(gpu.losses[i], cpu.losses[i], loss_tol * cpu.losses[i]) << "micro-batch " << i;
  }
  EXPECT_TRUE(testing::close(gpu.logits, cpu.logits, precision, "logits", 2.0));
  ASSERT_EQ(gpu.grads.size(), cpu.grads.size());
  const double loosen = precision == Precision::fp32 ? 10.0 : 2.5;
  for (const model::ParamTensor& t : layout.tensors()) {
    const auto at = [&t](const std::vector<float>& v) {
      const auto begin = v.begin() + static_cast<std::ptrdiff_t>(t.offset);
      return std::vector<float>(begin, begin + static_cast<std::ptrdiff_t>(t.numel));
    };
    const std::vector<float> expected = at(cpu.grads);
    EXPECT_TRUE(reference::all_close(at(gpu.grads), expected,
                                     testing::tolerance(precision, expected, loosen, 0.0),
                                     "gradient of " + t.name));
  }
}

class GpuStage : public testing::GpuPrecisionTest {};

TEST_P(GpuStage, LossLogitsAndGradientsMatchTheCpuForEveryPartition) {
  const model::StageShape shape = whole_shape();
  const model::ParamLayout layout(shape.config, shape.range);
  const std::vector<float> params = make_params(layout, GetParam());
  const std::vector<Batch> batches{make_batch(shape, 1)};
  const Result cpu = run_cpu(shape, params, batches, 1.0f);
  for (const auto& blocks : std::vector<std::vector<std::size_t>>{{3}, {1, 2}, {1, 1, 1}}) {
    SCOPED_TRACE(::testing::Message() << "stages of " << ::testing::PrintToString(blocks));
    expect_match(run_gpu(shape, params, batches, 1.0f, blocks, GetParam()), cpu, layout,
                 GetParam());
  }
}

TEST_P(GpuStage, GradientsAccumulateOverMicroBatchesWithTheLossScale) {
  const model::StageShape shape = whole_shape();
  const model::ParamLayout layout(shape.config, shape.range);
  const std::vector<float> params = make_params(layout, GetParam());
  const std::vector<Batch> batches{make_batch(shape, 3), make_batch(shape, 5)};
  const Result cpu = run_cpu(shape, params, batches, 0.5f);
  expect_match(run_gpu(shape, params, batches, 0.5f, {2, 1}, GetParam()), cpu, layout, GetParam());
}

TEST_P(GpuStage, CublasLtAndGemmPathsAgree) {
  const model::StageShape shape = whole_shape();
  const model::ParamLayout layout(shape.config, shape.range);
  const std::vector<float> params = make_params(layout, GetParam());
  const std::vector<Batch> batches{make_batch(shape, 9)};
  const Result cpu = run_cpu(shape, params, batches, 1.0f);
  expect_match(run_gpu(shape, params, batches, 1.0f, {3}, GetParam(), false), cpu, layout,
               GetParam());
}

// Zero Bubble's I and W run the fused backward's kernels on the same inputs, so one micro-batch's
// weight gradients are the fused backward's bit for bit, wherever W runs. Over two micro-batches
// whose Ws run last first, each gradient adds the same terms in another order: the CPU's within
// the tests' tolerance.
TEST_P(GpuStage, SplitBackwardEqualsTheFusedOneBitwise) {
  const model::StageShape shape = whole_shape();
  const model::ParamLayout layout(shape.config, shape.range);
  const std::vector<float> params = make_params(layout, GetParam());
  for (const auto& blocks : std::vector<std::vector<std::size_t>>{{3}, {1, 2}, {1, 1, 1}}) {
    SCOPED_TRACE(::testing::Message() << "stages of " << ::testing::PrintToString(blocks));
    const std::vector<Batch> one{make_batch(shape, 13)};
    const Result fused = run_gpu(shape, params, one, 1.0f, blocks, GetParam());
    const Result split = run_gpu(shape, params, one, 1.0f, blocks, GetParam(), true, true);
    EXPECT_EQ(split.losses, fused.losses);
    EXPECT_EQ(split.grads, fused.grads);  // bitwise: the same kernels on the same values
    const std::vector<Batch> two{make_batch(shape, 15), make_batch(shape, 17)};
    const Result cpu = run_cpu(shape, params, two, 0.5f);
    expect_match(run_gpu(shape, params, two, 0.5f, blocks, GetParam(), true, true), cpu, layout,
                 GetParam());
  }
}

TEST_P(GpuStage, SplitBackwardRefusesAStashOfAnotherStageAndAWeightHalfWithoutItsInputHalf) {
  const model::StageShape whole = whole_shape();
  model::StageShape top = whole;
  top.range = {1, 2};
  Stage stage(top, GetParam());
  Stage other(whole, GetParam());
  ActivationSlot slot = stage.make_slot();
  WeightGradStash wrong = other.make_weight_stash(), mine = stage.make_weight_stash();
  const model::ParamLayout& layout = stage.layout();
  DeviceTensor weights(GetParam(), layout.size());
  DeviceBuffer<float> grads(layout.size());
  DeviceTensor x(GetParam(), whole.rows() * whole.config.d_model);
  DeviceTensor d_input(GetParam(), whole.rows() * whole.config.d_model);
  PACI_CUDA_CHECK(cudaMemset(weights.view().data, 0, weights.bytes()));
  PACI_CUDA_CHECK(cudaMemset(x.view().data, 0, x.bytes()));
  const Batch batch = make_batch(whole, 19);
  stage.forward_loss(std::as_const(weights).view(),
                     StageInput::activations(std::as_const(x).view()), batch.targets, 1.0f, slot);
  EXPECT_THROW(stage.backward_input(std::as_const(weights).view(), slot, {}, d_input.view(), wrong),
               model::ModelError);
  EXPECT_THROW(stage.backward_weight(MutableTensorView::of(grads.data(), grads.size()), slot, mine),
               model::ModelError);  // no I has filled it
  stage.backward_input(std::as_const(weights).view(), slot, {}, d_input.view(), mine);
  EXPECT_TRUE(mine.filled());
  stage.backward_weight(MutableTensorView::of(grads.data(), grads.size()), slot, mine);
  EXPECT_FALSE(mine.filled());
  stage.synchronize();
}

INSTANTIATE_TEST_SUITE_P(Precisions, GpuStage, ::testing::Values(Precision::fp32, Precision::bf16),
                         testing::precision_name);

class GpuStageErrors : public testing::GpuTest {};

TEST_F(GpuStageErrors, RejectsWrongWeightsIdsAndEmptySlots) {
  const model::StageShape shape = whole_shape();
  Stage stage(shape, Precision::fp32);
  ActivationSlot slot = stage.make_slot();
  DeviceTensor bf16_weights(Precision::bf16, stage.layout().size());
  DeviceTensor weights(Precision::fp32, stage.layout().size());
  DeviceBuffer<float> grads(stage.layout().size());
  Batch batch = make_batch(shape, 11);
  EXPECT_THROW(stage.forward_loss(bf16_weights.view(), StageInput::tokens(batch.tokens),
                                  batch.targets, 1.0f, slot),
               model::ModelError);
  batch.tokens[5] = static_cast<std::int32_t>(shape.config.vocab);
  EXPECT_THROW(stage.forward_loss(std::as_const(weights).view(), StageInput::tokens(batch.tokens),
                                  batch.targets, 1.0f, slot),
               model::ModelError);
  EXPECT_THROW(stage.backward(std::as_const(weights).view(),
                              MutableTensorView::of(grads.data(), grads.size()), slot, {}, {}),
               model::ModelError);
  EXPECT_THROW(stage.forward(std::as_const(weights).view(), StageInput::tokens(batch.tokens), slot),
               model::ModelError);  // the last stage needs forward_loss
}

}  // namespace
}  // namespace paci::cuda
