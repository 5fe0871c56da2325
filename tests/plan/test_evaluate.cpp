// paci plan's cost model and evaluation: the primitives (GEMM by shape, memory-bound kernels, ring
// collectives) behave as their formulas say; a configuration's files replay to its step; the
// knobs move time and memory the way they must (recomputation trades memory for time, the
// distributed optimizer shards the optimizer state, overlap hides gradient reduction, PACI has no
// flush); bad configurations are refused in one line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "plan/costs/costs.hpp"
#include "plan/evaluate/evaluate.hpp"
#include "plan/report/report.hpp"
#include "schedules/formats.hpp"
#include "sim/engine.hpp"

namespace paci::plan {
namespace {

using ::testing::HasSubstr;

PlanConfig llama70b_on_h100() {
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

// evaluate() refuses `bad` with a message holding `fragment`.
void refused(const PlanConfig& bad, const std::string& fragment) {
  try {
    evaluate(bad);
    ADD_FAILURE() << "accepted: " << fragment;
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr(fragment));
  }
}

TEST(PlanPrimitives, GemmRunsNearItsMeasuredEfficiencyWhenLargeAndFarBelowWhenSmall) {
  const ClusterSpec c = cluster_preset("a100-80gb");
  const double big = gemm_s(c, 8192, 8192, 8192);
  const double big_rate = 2.0 * 8192.0 * 8192.0 * 8192.0 / big;
  EXPECT_NEAR(big_rate / (c.peak_flops * c.gemm_efficiency), 1.0, 0.01);
  // A skinny GEMM moves more bytes than its FLOPs can hide, and one too small to fill the SMs
  // runs a partial wave: both far below the large GEMM's rate.
  const double skinny = gemm_s(c, 8, 8192, 8192);
  EXPECT_LT(2.0 * 8 * 8192.0 * 8192.0 / skinny, 0.1 * big_rate);
  const double tiny = gemm_s(c, 256, 256, 256);
  EXPECT_LT(2.0 * 256 * 256 * 256.0 / tiny, 0.1 * big_rate);
  EXPECT_GE(tiny, c.kernel_launch_s);
  EXPECT_EQ(gemm_s(c, 0, 10, 10), 0.0);
}

TEST(PlanPrimitives, CollectivesFollowTheRingFormulas) {
  const ClusterSpec c = cluster_preset("a100-80gb");
  for (const double bytes : {1e5, 1e7, 1e9}) {
    // A reduce-scatter moves half an all-reduce's bytes.
    EXPECT_NEAR(collective_s(c, Collective::all_reduce, bytes, 8, 8),
                2 * collective_s(c, Collective::reduce_scatter, bytes, 8, 8), 1e-12);
    EXPECT_EQ(collective_s(c, Collective::all_reduce, bytes, 1, 1), 0.0);
    // Across nodes a GPU's share of the network is far below NVLink.
    EXPECT_GT(collective_s(c, Collective::all_reduce, bytes, 16, 1),
              collective_s(c, Collective::all_reduce, bytes, 8, 8));
  }
  // Large inside a node: 2(n-1)/n x bytes at the measured curve's top bus bandwidth.
  const double top = c.nvlink.allreduce_busbw_by_bytes.back().second;
  const double huge = 64e9;
  EXPECT_NEAR(collective_s(c, Collective::all_reduce, huge, 8, 8), 1.75 * huge / top, 1e-9);
  // Across nodes, one GPU per node: the network's bandwidth x efficiency, plus latency per hop.
  const double net = c.network.bandwidth_bytes_per_s * c.network.efficiency;
  EXPECT_NEAR(collective_s(c, Collective::all_reduce, huge, 4, 1),
              1.5 * huge / net + 6 * c.network.latency_s, 1e-6);
  // Monotone in size.
  double last = 0;
  for (double bytes = 1e3; bytes < 1e11; bytes *= 3) {
    const double t = collective_s(c, Collective::all_gather, bytes, 8, 8);
    EXPECT_GE(t, last) << bytes;
    last = t;
  }
}

// An oversubscribed network (docs/cluster.md, "Oversubscription"): a ring over more nodes than a
// leaf holds, and a pipeline message between leaves, get 1/r of the network.
TEST(PlanPrimitives, OversubscriptionSlowsWhatCrossesLeaves) {
  ClusterSpec c = cluster_preset("h100-80gb");
  const double flat = collective_s(c, Collective::all_reduce, 1e9, 64, 8);
  c.network.oversubscription = 4;
  c.network.nodes_per_leaf = 8;  // the 8 nodes in one leaf
  EXPECT_EQ(collective_s(c, Collective::all_reduce, 1e9, 64, 8), flat);
  c.network.nodes_per_leaf = 4;  // across two leaves
  const double crossing = collective_s(c, Collective::all_reduce, 1e9, 64, 8);
  EXPECT_GT(crossing, 3.5 * flat);
  EXPECT_EQ(p2p_link(c, false, true).bandwidth_bytes_per_s,
            p2p_link(c, false).bandwidth_bytes_per_s / 4);
  EXPECT_EQ(p2p_link(c, true, true).bandwidth_bytes_per_s, p2p_link(c, true).bandwidth_bytes_per_s);
}

TEST(PlanEvaluate, FilesReplayToTheStepAndMemoryMatchesTheSimulator) {
  const PlanConfig c = llama70b_on_h100();
  SimResult sim;
  const PlanResult p = evaluate(c, {true}, sim);
  EXPECT_EQ(p.dp, 2);
  EXPECT_EQ(p.microbatches, 256);
  EXPECT_GT(p.step_s, 0);
  EXPECT_EQ(p.max_staleness, 0);
  // What -o writes, read back, simulates to the same makespan.
  const std::string dir = ::testing::TempDir() + "plan_files";
  write_plan_files(p, dir);
  const Schedule s = read_schedule(dir + "/schedule.json");
  const CostModel costs = read_cost_model(dir + "/costmodel.json");
  const SimResult again = simulate(s, costs, {false, nullptr});
  EXPECT_DOUBLE_EQ(again.critical_path.length_s, p.step_s);
  EXPECT_EQ(*std::max_element(again.device_peak_memory_bytes.begin(),
                              again.device_peak_memory_bytes.end()),
            p.peak_memory_bytes);
  // Tokens and FLOPs per second follow from the step.
  EXPECT_NEAR(p.tokens_per_s, 512.0 * 8192 / p.step_s, 1e-6 * p.tokens_per_s);
  EXPECT_NEAR(p.mfu, p.model_tflops_per_gpu * 1e12 / c.cluster.peak_flops, 1e-12);
  // The trace holds the collectives inside the actions and is well formed.
  const Timeline t = plan_timeline(p, sim);
  EXPECT_GT(t.phases.size(), 0u);
}

TEST(PlanEvaluate, RecomputationTradesMemoryForTime) {
  PlanConfig c = llama70b_on_h100();
  c.recompute = Recompute::none;
  const PlanResult none = evaluate(c);
  c.recompute = Recompute::selective;
  const PlanResult selective = evaluate(c);
  c.recompute = Recompute::full;
  const PlanResult full = evaluate(c);
  EXPECT_GT(none.peak_memory_bytes, full.peak_memory_bytes);
  EXPECT_GE(none.peak_memory_bytes, selective.peak_memory_bytes);
  EXPECT_LT(none.step_s, full.step_s);
  EXPECT_LE(none.step_s, selective.step_s);
  EXPECT_LT(selective.step_s, full.step_s);
}

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
TEST(PlanEvaluate, ASplitBackwardFreesAtIWhatWDoesNotRead) {
  const ModelSpec m = model_preset("llama3-70b");
  const ClusterSpec h100 = cluster_preset("h100-80gb");
  LayerRun r;
  r.tensor_parallel = 4;
  r.tp_ranks_per_node = 4;
  r.sequence_parallel = true;
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
  c.fp8_params = false;  // bf16 weights: the master weight kept as its 16 remainder bits
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

// Context parallelism (docs/costmodel.md): each GPU holds s/c of every sequence; the attention
// meets the other GPUs' keys and values around a ring (hidden behind the core, chunk by chunk) or
// all-gathered (exposed, and the gathered keys and values kept for the backward); the c GPUs hold
// the same weights, so the gradients are reduced and ZeRO shards over d x c.
TEST(PlanEvaluate, ContextParallelismSplitsTheSequenceAndMovesKeysAndValues) {
  const ModelSpec m = model_preset("llama3-8b");
  const ClusterSpec gpu = cluster_preset("h100-80gb");
  LayerRun r;
  r.tensor_parallel = 2;
  r.tp_ranks_per_node = 2;
  r.sequence_parallel = true;
  const PieceCosts whole = layer_costs(m, gpu, r);
  r.context_parallel = 2;
  r.cp_ranks_per_node = 2;
  const PieceCosts ring = layer_costs(m, gpu, r);
  r.cp_ranks_per_node = 1;  // across nodes: the ring steps at the network's pace
  const PieceCosts across = layer_costs(m, gpu, r);
  EXPECT_GT(across.forward_comm_s, ring.forward_comm_s);
  r.cp_ranks_per_node = 2;
  r.cp_all_gather = true;
  const PieceCosts gathered = layer_costs(m, gpu, r);
  ModelSpec half = m;
  half.seq_len = m.seq_len / 2;
  ActivationOptions a;
  a.tensor_parallel = 2;
  a.sequence_parallel = true;
  a.flash_attention = true;
  EXPECT_EQ(ring.activation_bytes, layer_activation_bytes(half, a));
  // K and V of the other GPU's 4096 tokens, bf16, this GPU's kv columns (8 heads / t of 128).
  const std::int64_t own = 4LL * (m.seq_len / 2) * (m.kv_heads / 2) * m.head_dim();
  EXPECT_EQ(gathered.activation_bytes, ring.activation_bytes + own);
  EXPECT_LT(ring.forward_s, whole.forward_s);  // half the tokens, half the attention
  EXPECT_GT(gathered.forward_comm_s, ring.forward_comm_s);

  PlanConfig c = llama70b_on_h100();
  c.gpus = 128;
  c.tp = 4;
  c.cp = 2;
  c.pp = 4;  // d = 4, replicas of the weights 8
  c.zero = 1;
  const PlanResult p = evaluate(c);
  for (const StagePlan& sp : p.stages) {
    const StageCost& cost = p.costs.stages[static_cast<std::size_t>(sp.stage)];
    EXPECT_EQ(cost.optimizer_bytes, (12 * sp.pieces.parameters + 7) / 8);
  }
  EXPECT_EQ(p.costs.stages[0].activation_message_bytes,
            2LL * c.microbatch_size * c.model.seq_len * c.model.d_model / (4 * 2));
  // Bad input: one line naming the knob and what works.
  c.cp = 4;  // t x c = 16 > 8: across nodes, accepted, the ring on the network
  EXPECT_NO_THROW(check_config(c));
  c.model.seq_len = 8190;  // 2c = 8 chunks do not divide it
  EXPECT_THROW(check_config(c), InputError);
  c.model.seq_len = 8192;
  c.cp = 2;
  c.flash_attention = false;
  EXPECT_THROW(check_config(c), InputError);
}

// FP8 (docs/costmodel.md, "FP8"): the four linear layers' GEMMs at the FP8 rate with 8-bit
// inputs, the casts that make them, their inputs kept in 8 bits for the backward, two 8-bit
// copies of their weights, and with per-tensor scales the amax reductions; MXFP8 has none of
// those reductions. A GPU without FP8 refuses it in one line.
TEST(PlanEvaluate, Fp8RunsTheLinearLayersAtTheFp8RateAndKeepsEightBitCopies) {
  const ModelSpec m = model_preset("llama3-70b");
  ClusterSpec gpu = cluster_preset("h100-80gb");
  // Given rates, so the test does not hang on the preset's sourced values.
  gpu.fp8_peak_flops = 2 * gpu.peak_flops;
  gpu.fp8_gemm_efficiency = gpu.gemm_efficiency;
  gpu.mxfp8_gemm_efficiency = gpu.gemm_efficiency;
  // A large GEMM: twice as fast; a bandwidth-bound one: its 8-bit inputs halve its bytes.
  const double bf16 = gemm_s(gpu, 8192, 8192, 8192);
  EXPECT_NEAR(gemm_s(gpu, 8192, 8192, 8192, 1, Precision::fp8) - gpu.kernel_launch_s,
              (bf16 - gpu.kernel_launch_s) / 2, 1e-9);
  EXPECT_LT(gemm_s(gpu, 8, 8192, 8192, 1, Precision::fp8), 0.6 * gemm_s(gpu, 8, 8192, 8192));

  LayerRun r;
  r.tensor_parallel = 8;
  r.tp_ranks_per_node = 8;
  r.sequence_parallel = true;
  const PieceCosts b = layer_costs(m, gpu, r);
  r.precision = Precision::fp8;
  const PieceCosts f = layer_costs(m, gpu, r);
  EXPECT_EQ(f.parameters, b.parameters);
  EXPECT_EQ(b.fp8_parameters, 0);
  EXPECT_EQ(f.fp8_parameters, b.parameters - 2 * m.d_model);  // all but the two RMSNorms
  EXPECT_LT(f.weight_grad_s, 0.6 * b.weight_grad_s);          // dW: GEMMs only, twice the rate
  EXPECT_LT(f.forward_s, b.forward_s);
  EXPECT_GT(f.forward_s, 0.5 * b.forward_s);      // the attention core and the casts stay
  EXPECT_LT(f.forward_comm_s, b.forward_comm_s);  // the all-gathers carry 8 bits
  EXPECT_EQ(f.backward_comm_s, b.backward_comm_s);
  // Kept for the backward: a byte less per element of the four GEMMs' inputs.
  const std::int64_t T = m.seq_len;
  EXPECT_EQ(b.activation_bytes - f.activation_bytes,
            2 * T / 8 * m.d_model + T * (m.d_model / 8) + T * (m.ffn / 8));

  PlanConfig c = llama70b_on_h100();
  c.cluster = gpu;
  c.zero = 1;
  const PlanResult pb = evaluate(c);
  c.precision = Precision::fp8;
  const PlanResult pf = evaluate(c);
  c.precision = Precision::mxfp8;
  const PlanResult pm = evaluate(c);
  EXPECT_LT(pf.step_s, 0.9 * pb.step_s);
  for (std::size_t s = 0; s < pf.stages.size(); ++s) {
    const std::int64_t copies = 2 * pf.stages[s].pieces.fp8_parameters;
    EXPECT_GT(copies, 0);
    EXPECT_EQ(pf.costs.stages[s].weight_bytes, pb.costs.stages[s].weight_bytes + copies);
    EXPECT_GT(pf.stages[s].amax_reduce_s, 0.0);  // over t x d = 16 GPUs, two nodes
    EXPECT_EQ(pm.stages[s].amax_reduce_s, 0.0);  // MXFP8: scales per block, nothing to reduce
    EXPECT_GT(pf.stages[s].optimizer_s, pb.stages[s].optimizer_s);  // the weights cast once
  }
  // The amax tree: 2 log2(nodes) network hops and 2 log2(GPUs per node) NVLink hops.
  EXPECT_NEAR(small_all_reduce_s(gpu, 16, 8), 2 * gpu.network.latency_s + 6 * gpu.nvlink.latency_s,
              1e-12);
  EXPECT_EQ(small_all_reduce_s(gpu, 1, 1), 0.0);

  // What a GPU cannot run, in one line naming what would.
  c = llama70b_on_h100();
  c.cluster = cluster_preset("a100-80gb");
  c.precision = Precision::fp8;
  try {
    evaluate(c);
    ADD_FAILURE() << "FP8 on an A100 accepted";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("--precision fp8: a100-80gb has no FP8 tensor cores"));
    EXPECT_THAT(e.what(), HasSubstr("--precision bf16 would work"));
  }
  c.cluster = cluster_preset("h100-80gb");
  c.precision = Precision::mxfp8;
  EXPECT_THROW(evaluate(c), InputError);  // Hopper has no block-scaled FP8
  EXPECT_EQ(parse_precision("fp8"), Precision::fp8);
  EXPECT_THROW(parse_precision("fp4"), InputError);
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

TEST(PlanEvaluate, OverlappedGradientReductionHidesPartOfTheUpdate) {
  PlanConfig c = llama70b_on_h100();
  c.gpus = 256;
  const PlanResult exposed = evaluate(c);
  c.overlap_grad_reduce = true;
  const PlanResult overlapped = evaluate(c);
  for (std::size_t s = 0; s < exposed.stages.size(); ++s) {
    EXPECT_GT(exposed.stages[s].reduce_s, 0);
    EXPECT_DOUBLE_EQ(exposed.stages[s].exposed_reduce_s, exposed.stages[s].reduce_s);
    EXPECT_LT(overlapped.stages[s].exposed_reduce_s, exposed.stages[s].reduce_s);
    EXPECT_GT(overlapped.stages[s].exposed_reduce_s, 0);  // the last bucket
  }
  EXPECT_LT(overlapped.step_s, exposed.step_s);
}

TEST(PlanEvaluate, PaciRunsWithoutTheFlushOfOneFOneB) {
  PlanConfig c = llama70b_on_h100();
  c.global_batch = 16;  // M = 8 micro-batches for 4 stages: a large bubble for 1F1B
  const PlanResult flushed = evaluate(c);
  c.kind = "paci";
  const PlanResult paci = evaluate(c);
  EXPECT_LT(paci.step_s, flushed.step_s);
  EXPECT_LT(paci.bubble_ratio, flushed.bubble_ratio);
  EXPECT_EQ(paci.max_staleness, 1);
  EXPECT_GT(flushed.bubble_ratio, 0.2);
}

TEST(PlanEvaluate, TensorParallelCollectivesGrowWithTheDegree) {
  PlanConfig c = llama70b_on_h100();
  c.tp = 1;
  c.pp = 8;
  c.recompute = Recompute::full;
  const PlanResult t1 = evaluate(c);
  EXPECT_EQ(t1.stages[1].pieces.forward_comm_s, 0.0);
  c.tp = 8;
  const PlanResult t8 = evaluate(c);
  EXPECT_GT(t8.stages[1].pieces.forward_comm_s, 0.0);
  // Eight-way tensor parallelism divides a layer's GEMM work by about eight.
  EXPECT_NEAR(t1.stages[1].pieces.weight_grad_s / t8.stages[1].pieces.weight_grad_s, 8.0, 1.0);
}

// Transformer Engine's overlapped reduce-scatters and bulk overlaps hold 16 SMs beside the GEMM
// they overlap: on a GPU with more SMs (every GEMM still filling them) the same overlap costs
// less, by the SMs' share; without the overlap the SM count changes nothing here.
TEST(PlanEvaluate, OverlappedCollectivesTakeTheirSmsFromTheGemms) {
  const ModelSpec m = model_preset("llama3-70b");
  ClusterSpec gpu = cluster_preset("h100-80gb");
  LayerRun r;
  r.tensor_parallel = 4;
  r.tp_ranks_per_node = 4;
  r.sequence_parallel = true;
  for (const bool overlap : {false, true}) {
    SCOPED_TRACE(overlap);
    r.tp_comm_overlap = overlap;
    gpu.sms = 132;
    const PieceCosts fewer = layer_costs(m, gpu, r);
    gpu.sms = 264;
    const PieceCosts more = layer_costs(m, gpu, r);
    EXPECT_DOUBLE_EQ(fewer.forward_s, more.forward_s);  // the GEMMs fill both
    if (overlap) {
      EXPECT_GT(fewer.forward_comm_s, more.forward_comm_s);
      EXPECT_GT(fewer.backward_comm_s, more.backward_comm_s);
      // At most 16/116 of the GEMMs' time (all of it overlapped) on top.
      EXPECT_LT(fewer.forward_comm_s - more.forward_comm_s, 16.0 / 116 * fewer.forward_s);
    } else {
      EXPECT_DOUBLE_EQ(fewer.forward_comm_s, more.forward_comm_s);
      EXPECT_DOUBLE_EQ(fewer.backward_comm_s, more.backward_comm_s);
    }
  }
}

TEST(PlanEvaluate, RefusesImpossibleConfigurationsInOneLine) {
  const auto refused = [](PlanConfig c, const std::string& fragment) {
    try {
      evaluate(c);
      ADD_FAILURE() << "accepted: " << fragment;
    } catch (const InputError& e) {
      EXPECT_THAT(e.what(), HasSubstr(fragment));
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    }
  };
  PlanConfig c = llama70b_on_h100();
  c.gpus = 60;
  refused(c, "--gpus 60 is not divisible by --tp 8 x --pp 4 = 32");
  c = llama70b_on_h100();
  c.tp = 3;
  c.gpus = 96;
  refused(c, "--tp 3 does not divide the model's attention heads (64)");
  c = llama70b_on_h100();
  c.global_batch = 511;
  refused(c, "--global-batch 511 is not divisible by d x b = 2 x 1");
  c = llama70b_on_h100();
  c.pp = 64;
  c.tp = 1;
  c.kind = "interleaved";
  c.chunks = 2;
  refused(c, "80 layers are too few for --pp 64 x --chunks 2 = 128 stages");
  c = llama70b_on_h100();
  c.chunks = 2;
  refused(c, "--chunks 2 is interleaved's");
  c = llama70b_on_h100();
  c.partition = {20, 20, 20};
  refused(c, "--partition lists 3 stages, the pipeline has 4");
  c = llama70b_on_h100();
  c.kind = "2bw";
  c.global_batch = 4;
  refused(c, "2bw needs at least as many micro-batches per step as stages");
}

TEST(PlanEvaluate, ATooLargeConfigurationIsNotAnErrorButDoesNotFit) {
  PlanConfig c = llama70b_on_h100();
  c.tp = 1;
  c.pp = 2;
  c.gpus = 64;
  c.recompute = Recompute::none;
  const PlanResult p = evaluate(c);
  EXPECT_FALSE(p.fits);
  EXPECT_GT(static_cast<double>(p.peak_memory_bytes), c.cluster.memory_bytes);
  EXPECT_THAT(plan_text(p), HasSubstr("DOES NOT FIT"));
  EXPECT_FALSE(plan_json(p)["fits"].get<bool>());
}

}  // namespace
}  // namespace paci::plan
