// Where a configuration's state and activations live: ZeRO 1-3 shard the optimizer state,
// gradients and weights and move their collectives; HSDP shards over a group; a split backward
// frees at I what W does not read; offloading moves activations to host memory; FP8 weights,
// bf16 moments and bf16 gradients shrink the state. The rest of the evaluation:
// test_evaluate.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "plan/costs/collectives.hpp"
#include "plan/costs/costs.hpp"
#include "plan/evaluate/evaluate.hpp"
#include "tests/plan/evaluate_fixtures.hpp"

namespace paci::plan {
namespace {

using ::testing::HasSubstr;

// ZeRO (docs/costmodel.md): 1 shards the optimizer state, 2 the gradients too (reduce-scattered
// in every micro-batch's backward), 3 the weights too (gathered per layer for every micro-batch's
// forward and backward, behind the compute of the layer before).
TEST(PlanEvaluate, ZeroStagesShardStateGradientsAndWeightsAndMoveTheirCollectives) {
  PlanConfig c = llama70b_on_h100();
  c.gpus = 256;  // d = 8, one replica per node (t = 8)
  c.overlap_grad_reduce = true;
  std::vector<PlanResult> z;
  for (std::int32_t zero = 0; zero <= 3; ++zero) {
    c.zero = zero;
    z.push_back(evaluate(c));
  }
  const std::int64_t d = 8;
  for (std::int32_t zero = 0; zero <= 3; ++zero) {
    SCOPED_TRACE(zero);
    for (const StagePlan& sp : z[zero].stages) {
      const StageCost& cost = z[zero].costs.stages[static_cast<std::size_t>(sp.stage)];
      const std::int64_t P = sp.pieces.parameters;
      EXPECT_EQ(cost.weight_bytes, zero >= 3 ? (2 * P + d - 1) / d : 2 * P);
      EXPECT_EQ(cost.gradient_bytes, zero >= 2 ? (4 * P + d - 1) / d : 4 * P);
      EXPECT_EQ(cost.optimizer_bytes, zero >= 1 ? (12 * P + d - 1) / d : 12 * P);
      // Per micro-batch: ZeRO 2 and 3 reduce-scatter the gradients, ZeRO 3 gathers the weights
      // twice; what the compute does not hide is in F, I and W.
      EXPECT_EQ(sp.zero_weight_grad_s > 0, zero >= 2);
      EXPECT_EQ(sp.zero_forward_s > 0, zero == 3);
      EXPECT_DOUBLE_EQ(sp.zero_forward_s, sp.zero_input_grad_s);
      EXPECT_LE(sp.exposed_zero_forward_s, sp.zero_forward_s);
      EXPECT_LE(sp.exposed_zero_weight_grad_s, sp.zero_weight_grad_s);
      EXPECT_DOUBLE_EQ(cost.forward_s, sp.pieces.forward_total_s() + sp.exposed_zero_forward_s);
      EXPECT_DOUBLE_EQ(cost.weight_grad_s, sp.pieces.weight_grad_s + sp.exposed_zero_weight_grad_s);
      // At the end of the step: ZeRO 2 and 3 have no gradient reduction left, ZeRO 3 no gather.
      if (zero >= 2) {
        EXPECT_EQ(sp.exposed_reduce_s > 0, zero == 2) << sp.stage;
      }
      if (zero == 3) {
        EXPECT_EQ(sp.reduce_s, 0.0);
      }
    }
  }
  // A middle stage's weights are gathered one layer at a time: L collectives of one layer's bf16.
  const StagePlan& middle = z[3].stages[1];
  const std::int64_t layer = middle.pieces.parameters / middle.layers;
  EXPECT_NEAR(middle.zero_forward_s,
              middle.layers * collective_s(c.cluster, Collective::all_gather, 2.0 * layer, d, 1),
              1e-12);
  EXPECT_NEAR(
      middle.zero_weight_grad_s,
      middle.layers * collective_s(c.cluster, Collective::reduce_scatter, 4.0 * layer, d, 1),
      1e-12);
  // Each stage shards more and holds less.
  EXPECT_LT(z[1].peak_memory_bytes, z[0].peak_memory_bytes);
  EXPECT_LT(z[2].peak_memory_bytes, z[1].peak_memory_bytes);
  EXPECT_LT(z[3].peak_memory_bytes, z[2].peak_memory_bytes);
  // Out of range: one line.
  c.zero = 4;
  EXPECT_THROW(evaluate(c), InputError);
}

// A split backward's W reads the four GEMMs' inputs: of a layer's activations those stay until W,
// the rest is freed at I (the QKV and first MLP inputs sequence-sharded with SP, 8-bit with FP8);
// under full recomputation nothing is freed (the layer's input is all it keeps).
// One backward runs at a time on a device, so of its stages' transient workspaces (the layer a
// full recomputation rebuilds, ZeRO 3's gathered pieces) it holds the largest, once: with
// interleaving and ZeRO 3 the last device's largest gathered piece is the head of its last model
// stage (Llama 3 70B's head, 128,256 x 8,192 / t, is larger than a layer's share), not its first
// stage's layer.
TEST(PlanEvaluate, ADeviceHoldsItsLargestStageWorkspaceOnce) {
  PlanConfig c = llama70b_on_h100();
  c.kind = "interleaved";
  c.chunks = 2;
  c.zero = 3;
  c.recompute = Recompute::full;
  const PlanResult r = evaluate(c);
  const ConfigCosts costs(c);
  ASSERT_EQ(r.stages.size(), 8u);
  for (std::int32_t d = 0; d < c.pp; ++d) {
    std::int64_t held = 0, largest = 0;
    std::int32_t holders = 0;
    for (std::size_t s = 0; s < r.stages.size(); ++s) {
      if (r.stages[s].device != d) continue;
      held += r.costs.stages[s].workspace_bytes;
      holders += r.costs.stages[s].workspace_bytes > 0 ? 1 : 0;
      largest = std::max(largest, costs.stage_cost(r.stages[s]).workspace_bytes);
    }
    EXPECT_EQ(held, largest) << "device " << d;
    EXPECT_EQ(holders, 1) << "device " << d;
  }
  EXPECT_GT(r.costs.stages[7].workspace_bytes, 0);  // the head's gathered piece
  EXPECT_EQ(r.costs.stages[3].workspace_bytes, 0);
  EXPECT_GT(costs.stage_cost(r.stages[7]).workspace_bytes,
            costs.stage_cost(r.stages[3]).workspace_bytes);
}

TEST(PlanEvaluate, ASplitBackwardFreesAtIWhatWDoesNotRead) {
  const ModelSpec m = model_preset("llama3-70b");
  const ClusterSpec h100 = cluster_preset("h100-80gb");
  LayerRun r = sequence_parallel_run(4);
  const std::int64_t T = m.seq_len, h = m.d_model, q = h / 4, f = m.ffn / 4;
  for (const Precision precision : {Precision::bf16, Precision::fp8}) {
    r.precision = precision;
    const PieceCosts p = layer_costs(m, h100, r);
    const std::int64_t bytes = precision == Precision::bf16 ? 2 : 1;
    EXPECT_EQ(p.release_bytes, p.activation_bytes - bytes * (2 * (T / 4) * h + T * q + T * f));
    EXPECT_GT(p.release_bytes, 0);
  }
  r.recompute = Recompute::full;
  EXPECT_EQ(layer_costs(m, h100, r).release_bytes, 0);
}

// Activation offloading (Megatron-LM's --cpu-offloading-num-layers): the first N layers'
// activations leave the GPU (at most L - N layers' stay), and the copies over the host link show
// where the other layers' compute cannot hide them: on GB200's NVLink-C2C not at all, on H100's
// PCIe in proportion to what they exceed.
TEST(PlanEvaluate,
     OffloadedActivationsLeaveTheGpuAndTheirCopiesShowOnlyPastTheComputeThatHidesThem) {
  PlanConfig c = llama70b_on_h100();
  c.cluster = cluster_preset("gb200-nvl72");
  c.tp = 1;
  c.pp = 1;
  c.gpus = 64;
  c.global_batch = 128;
  c.microbatch_size = 2;
  c.recompute = Recompute::none;
  c.zero = 3;
  c.precision = Precision::fp8;
  const PlanResult kept = evaluate(c);
  c.offload_layers = 40;
  const PlanResult offloaded = evaluate(c);
  const StagePlan& sp = offloaded.stages[0];
  const std::int64_t layer =
      kept.costs.stages[0].activation_bytes - offloaded.costs.stages[0].activation_bytes;
  EXPECT_EQ(layer, 40 * (sp.host_bytes / 40));
  EXPECT_EQ(offloaded.host_memory_bytes, sp.host_bytes);
  EXPECT_EQ(kept.peak_memory_bytes - offloaded.peak_memory_bytes, sp.host_bytes);
  EXPECT_FALSE(kept.fits);  // Megatron-Bridge's GB200 recipe offloads 40 of 80 layers to fit
  EXPECT_TRUE(offloaded.fits);
  EXPECT_EQ(sp.exposed_offload_forward_s, 0.0);  // C2C: hidden behind the other 78 layers
  EXPECT_EQ(sp.exposed_offload_backward_s, 0.0);
  EXPECT_DOUBLE_EQ(offloaded.step_s, kept.step_s);

  // On H100's PCIe 5 (55 GB/s) the copies of 70 of 80 layers exceed what the other layers
  // compute: the excess is the forward's exposure, and the backward (twice the compute) hides
  // more of them.
  c.cluster = cluster_preset("h100-80gb");
  c.tp = 8;
  c.microbatch_size = 1;
  c.global_batch = 8;
  c.precision = Precision::bf16;
  c.offload_layers = 70;
  const PlanResult pcie = evaluate(c);
  const StagePlan& p = pcie.stages[0];
  const double copy_s = static_cast<double>(p.host_bytes / 70) /
                        (c.cluster.host_bandwidth_bytes_per_s * c.cluster.host_efficiency);
  c.offload_layers = 60;
  const PlanResult fewer = evaluate(c);
  c.offload_layers = 0;
  const PlanResult none = evaluate(c);
  EXPECT_GT(fewer.stages[0].exposed_offload_forward_s, 0.0);
  EXPECT_LT(p.exposed_offload_forward_s, 70 * copy_s);
  // Ten more copies, all past what the compute hides: ten copies' time more.
  EXPECT_NEAR(p.exposed_offload_forward_s - fewer.stages[0].exposed_offload_forward_s, 10 * copy_s,
              1e-9);
  EXPECT_LT(p.exposed_offload_backward_s, p.exposed_offload_forward_s);
  EXPECT_NEAR(pcie.stages[0].pieces.forward_s - none.stages[0].pieces.forward_s,
              p.exposed_offload_forward_s, 1e-12);
  EXPECT_GT(pcie.step_s, none.step_s);
  // Host memory: 250 GB per GPU on a DGX H100.
  EXPECT_TRUE(pcie.host_fits);
  // Every layer but the last offloaded: layer i + 1 waits for layer i's copy, nothing hides them.
  c.offload_layers = 79;
  const StagePlan all = evaluate(c).stages[0];
  EXPECT_NEAR(all.exposed_offload_forward_s, 79 * copy_s, 1e-9);
  EXPECT_NEAR(all.exposed_offload_backward_s, 79 * copy_s, 1e-9);
  c.offload_layers = 0;

  PlanConfig bad = c;
  bad.offload_layers = 80;
  refused(bad, "--offload-layers 80: Megatron-LM offloads fewer layers than the model's 80");
  bad.offload_layers = 8;
  bad.pp = 2;
  refused(bad,
          "--offload-layers 8 with --pp 2: Megatron-LM offloads activations only without "
          "pipeline parallelism");
  bad.pp = 1;
  bad.recompute = Recompute::full;
  refused(bad, "--offload-layers 8 with --recompute full");
  bad.recompute = Recompute::none;
  bad.kind = "gpipe";  // at p = 1 Megatron-LM runs one micro-batch at a time: 1F1B's order
  refused(bad, "--offload-layers 8 with --kind gpipe");
  bad.kind = "1f1b";
  bad.cluster.host_bandwidth_bytes_per_s = bad.cluster.host_efficiency = 0;
  bad.cluster.host_memory_bytes = 0;
  refused(bad, "gives no link to host memory");
}

// FP8 weights (--fp8-param-gather) keep the FP8 GEMMs' weights only as their two 8-bit copies
// and gather them in 8 bits; bf16 AdamW moments (the precision-aware optimizer) take 4 bytes of
// state per parameter, and the fp32 master weight 2 more where Megatron-LM keeps only its 16
// remainder bits (bf16 weights).
TEST(PlanEvaluate, Fp8WeightsAndBf16MomentsShrinkTheStateAsMegatronKeepsIt) {
  PlanConfig c = llama70b_on_h100();
  c.zero = 1;
  c.gpus = 128;  // d = 4
  c.global_batch = 128;
  c.precision = Precision::fp8;
  const PlanResult base = evaluate(c);
  const StageCost& b = base.costs.stages[1];
  const std::int64_t P = base.stages[1].pieces.parameters, F = base.stages[1].pieces.fp8_parameters;
  ASSERT_GT(F, 0);
  EXPECT_EQ(b.weight_bytes, 2 * P + 2 * F);
  EXPECT_EQ(b.optimizer_bytes, (12 * P + 3) / 4);
  c.fp8_params = true;
  const PlanResult fp8 = evaluate(c);
  const StageCost& f = fp8.costs.stages[1];
  EXPECT_EQ(f.weight_bytes, 2 * P);  // bf16 for the rest, 1 + 1 for each FP8 weight
  // The distributed optimizer's end-of-step gather moves 1 byte per FP8 weight, 2 per other.
  EXPECT_LT(fp8.stages[1].reduce_s, base.stages[1].reduce_s);
  c.bf16_moments = true;
  const PlanResult moments = evaluate(c);
  EXPECT_EQ(moments.costs.stages[1].optimizer_bytes, (8 * P + 3) / 4);  // fp32 master weights
  EXPECT_LT(moments.stages[1].optimizer_s, fp8.stages[1].optimizer_s);
  // ZeRO 3: the two gathered layers arrive with their FP8 weights in 8 bits (a byte less each),
  // and the gathered weight is the row-wise copy (only the transposed one made): 3 bytes less
  // per FP8 weight of a layer in the workspace.
  c.zero = 3;
  c.bf16_moments = false;
  const PlanResult z3 = evaluate(c);
  c.fp8_params = false;
  const PlanResult z3_bf16 = evaluate(c);
  const std::int64_t layer_fp8 = F / z3.stages[1].layers;
  EXPECT_EQ(z3_bf16.stages[1].zero_workspace_bytes - z3.stages[1].zero_workspace_bytes,
            3 * layer_fp8);
  c.zero = 1;
  c.bf16_moments = true;
  // bf16 weights: the master weight kept as its 16 remainder bits
  EXPECT_EQ(evaluate(c).costs.stages[1].optimizer_bytes, (6 * P + 3) / 4);
  c.precision = Precision::bf16;
  EXPECT_EQ(evaluate(c).costs.stages[1].optimizer_bytes, (6 * P + 3) / 4);

  PlanConfig bad = c;
  bad.fp8_params = true;
  refused(bad, "--fp8-param-gather keeps the FP8 GEMMs' weights in 8 bits: it needs --precision");
  bad.precision = Precision::fp8;
  bad.zero = 0;
  bad.bf16_moments = false;
  refused(bad, "it needs --zero 1, 2 or 3");
  bad.fp8_params = false;
  bad.bf16_moments = true;
  refused(bad, "--moments-dtype bf16 is Megatron-LM's precision-aware optimizer");
  // One replica: nothing to shard, ZeRO 0 is the distributed optimizer; both run.
  PlanConfig one = llama70b_on_h100();
  one.gpus = 32;  // t = 8 x p = 4: d = 1
  one.global_batch = 32;
  one.precision = Precision::fp8;
  one.fp8_params = one.bf16_moments = true;
  EXPECT_NO_THROW(evaluate(one));
}

// HSDP: ZeRO shards over a group of the replicas, the groups replicating one another; the state
// is divided by the group, the gradient shards all-reduced between the groups.
TEST(PlanEvaluate, HsdpShardsOverItsGroupAndAllReducesBetweenGroups) {
  PlanConfig c = llama70b_on_h100();
  c.tp = 4;
  c.pp = 1;
  c.gpus = 64;  // d = 16, two replicas to a node
  c.global_batch = 64;
  c.overlap_grad_reduce = true;
  for (const std::int32_t zero : {1, 3}) {
    SCOPED_TRACE(zero);
    c.zero = zero;
    c.shard_group = 0;
    const PlanResult full = evaluate(c);
    c.shard_group = 16;  // all of them: the same plan
    const PlanResult all = evaluate(c);
    EXPECT_EQ(all.peak_memory_bytes, full.peak_memory_bytes);
    EXPECT_DOUBLE_EQ(all.step_s, full.step_s);
    c.shard_group = 4;
    const PlanResult hsdp = evaluate(c);
    const StagePlan& sp = hsdp.stages[0];
    const StageCost& cost = hsdp.costs.stages[0];
    const std::int64_t P = sp.pieces.parameters;
    EXPECT_EQ(cost.optimizer_bytes, (12 * P + 3) / 4);
    EXPECT_EQ(cost.weight_bytes, zero == 3 ? (2 * P + 3) / 4 : 2 * P);
    EXPECT_GT(hsdp.peak_memory_bytes, full.peak_memory_bytes);
    const double between =
        collective_s(c.cluster, Collective::all_reduce, 4.0 * static_cast<double>(P) / 4, 4, 1);
    if (zero == 1) {
      // At the end of the step: reduce-scattered in the group of 4 (2 to a node), the shard
      // all-reduced between the 4 groups (one to a node), the weights gathered in the group.
      EXPECT_NEAR(sp.reduce_s,
                  collective_s(c.cluster, Collective::reduce_scatter, 4.0 * P, 4, 2) + between +
                      collective_s(c.cluster, Collective::all_gather, 2.0 * P, 4, 2),
                  1e-12);
    } else {
      // Per micro-batch, layer by layer: the bf16 weights gathered in the group (2 of its 4 to a
      // node, not 16 over 8 nodes: faster), the fp32 gradients reduce-scattered there (twice
      // the bytes) and their shards all-reduced between the groups on top.
      const StagePlan& whole = full.stages[0];
      EXPECT_LT(sp.zero_forward_s, whole.zero_forward_s);
      EXPECT_GT(sp.zero_weight_grad_s, 2 * sp.zero_forward_s);
    }
  }
  const auto refused = [&](std::int64_t group, std::int32_t zero, const std::string& fragment) {
    c.shard_group = group;
    c.zero = zero;
    try {
      evaluate(c);
      ADD_FAILURE() << "accepted: " << fragment;
    } catch (const InputError& e) {
      EXPECT_THAT(e.what(), HasSubstr(fragment));
    }
  };
  refused(3, 3, "--shard-group 3 must divide the weights' 16 replicas (d = 16 x c = 1)");
  refused(1, 3,
          "--shard-group 1 must divide the weights' 16 replicas (d = 16 x c = 1) and be at "
          "least 2");
  refused(4, 0, "--shard-group 4 is the group ZeRO shards over: it needs --zero 1, 2 or 3");
}

// bf16 gradients (Megatron-LM's --grad-reduce-in-bf16): half the gradient buffer and half the
// bytes of its data-parallel reduction.
TEST(PlanEvaluate, Bf16GradientsHalveTheBufferAndTheReduction) {
  PlanConfig c = llama70b_on_h100();
  c.zero = 1;
  const PlanResult fp32 = evaluate(c);
  c.bf16_gradients = true;
  const PlanResult bf16 = evaluate(c);
  for (std::size_t s = 0; s < fp32.stages.size(); ++s) {
    const std::int64_t params = fp32.stages[s].pieces.parameters;
    EXPECT_EQ(fp32.costs.stages[s].gradient_bytes, 4 * params);
    EXPECT_EQ(bf16.costs.stages[s].gradient_bytes, 2 * params);
    EXPECT_LT(bf16.stages[s].reduce_s, fp32.stages[s].reduce_s);
    EXPECT_LT(bf16.stages[s].optimizer_s, fp32.stages[s].optimizer_s);
  }
  EXPECT_LT(bf16.peak_memory_bytes, fp32.peak_memory_bytes);
  // The step's AdamW traffic: 38 bytes per parameter with fp32 gradients, 32 with bf16.
  const ClusterSpec& gpu = c.cluster;
  EXPECT_NEAR(optimizer_step_s(gpu, 1'000'000'000, 1, 0, true) - gpu.kernel_launch_s,
              (optimizer_step_s(gpu, 1'000'000'000, 1, 0) - gpu.kernel_launch_s) * 32 / 38, 1e-9);
}

TEST(PlanEvaluate, DistributedOptimizerShardsTheOptimizerStateOverTheReplicas) {
  PlanConfig c = llama70b_on_h100();
  c.gpus = 256;  // d = 8
  c.global_batch = 512;
  const PlanResult plain = evaluate(c);
  c.zero = 1;
  const PlanResult sharded = evaluate(c);
  for (std::size_t s = 0; s < plain.costs.stages.size(); ++s) {
    const StageCost& a = plain.costs.stages[s];
    const StageCost& b = sharded.costs.stages[s];
    EXPECT_EQ(a.weight_bytes, b.weight_bytes);
    EXPECT_NEAR(static_cast<double>(b.optimizer_bytes), a.optimizer_bytes / 8.0, 1.0);
  }
  EXPECT_LT(sharded.peak_memory_bytes, plain.peak_memory_bytes);
}

}  // namespace
}  // namespace paci::plan
