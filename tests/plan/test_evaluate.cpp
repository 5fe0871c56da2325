// paci plan's cost model and evaluation: the primitives (GEMM by shape, memory-bound kernels, ring
// collectives) behave as their formulas say; a configuration's files replay to its step; the
// knobs move time and memory the way they must (recomputation trades memory for time, the
// distributed optimizer shards the optimizer state, overlap hides gradient reduction, PACI has no
// flush); bad configurations are refused in one line. Where the state and the activations live
// (ZeRO, HSDP, offloading, FP8 weights, bf16 moments and gradients): test_evaluate_memory.cpp;
// mixtures of experts and DeepSeek-V3's stages: test_evaluate_moe.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "plan/costs/costs.hpp"
#include "plan/evaluate/evaluate.hpp"
#include "plan/report/report.hpp"
#include "schedules/formats.hpp"
#include "schedules/generators.hpp"
#include "sim/engine.hpp"
#include "tests/plan/evaluate_fixtures.hpp"

namespace paci::plan {
namespace {

using ::testing::HasSubstr;

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

// An all-to-all (mixture of experts' dispatch and combine): each GPU keeps 1/n of its buffer and
// sends the rest, its node's share over NVLink and the other nodes' over its NIC, at once.
TEST(PlanPrimitives, AllToAllSendsTheOtherGpusShares) {
  const ClusterSpec c = cluster_preset("h100-80gb");
  const double bytes = 1e9;
  EXPECT_EQ(all_to_all_s(c, bytes, 1, 1), 0.0);
  // Inside a node of 8: 7/8 of it on NVLink at its collective efficiency.
  const double inside = all_to_all_s(c, bytes, 8, 8);
  EXPECT_NEAR(
      inside,
      0.875 * bytes / (c.nvlink.bandwidth_bytes_per_s * c.nvlink.efficiency) + c.nvlink.latency_s,
      1e-12);
  // 16 GPUs over two nodes: half of it through the NIC, far slower than NVLink.
  const double net = c.network.bandwidth_bytes_per_s * c.network.efficiency;
  EXPECT_NEAR(all_to_all_s(c, bytes, 16, 8), 0.5 * bytes / net + c.network.latency_s, 1e-12);
  EXPECT_GT(all_to_all_s(c, bytes, 16, 8), 3 * inside);
  // One GPU per node: all but its own share crosses the network.
  EXPECT_NEAR(all_to_all_s(c, bytes, 4, 1), 0.75 * bytes / net + c.network.latency_s, 1e-12);
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

// Context parallelism (docs/costmodel.md): each GPU holds s/c of every sequence; the attention
// meets the other GPUs' keys and values around a ring (hidden behind the core, chunk by chunk) or
// all-gathered (exposed, and the gathered keys and values kept for the backward); the c GPUs hold
// the same weights, so the gradients are reduced and ZeRO shards over d x c.
TEST(PlanEvaluate, ContextParallelismSplitsTheSequenceAndMovesKeysAndValues) {
  const ModelSpec m = model_preset("llama3-8b");
  const ClusterSpec gpu = cluster_preset("h100-80gb");
  LayerRun r = sequence_parallel_run(2);
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

// The attention core at its measured rate for the length and the mask (attention_by_seq,
// interpolated in log length, clamped at both ends); with context parallelism's ring, c calls on
// chunks of the sequence: one under the mask, c - 1 unmasked at length s/(c·√2), and each step's
// partial result merged in bf16.
TEST(PlanEvaluate, AttentionRunsAtItsMeasuredRateForTheLengthAndTheRingsChunks) {
  const ClusterSpec gpu = cluster_preset("h100-80gb");
  const AttentionRate at4k = attention_rate(gpu, 4096), at8k = attention_rate(gpu, 8192);
  EXPECT_DOUBLE_EQ(at4k.causal_forward, 518e12);  // a row of the table
  EXPECT_DOUBLE_EQ(at8k.full_backward, 518e12);
  const AttentionRate mid = attention_rate(gpu, std::sqrt(4096.0 * 8192.0));  // halfway in log
  EXPECT_NEAR(mid.causal_forward, (518e12 + 529e12) / 2, 1e3);
  EXPECT_EQ(attention_rate(gpu, 100).causal_forward, 315e12);    // below 512: clamped
  EXPECT_EQ(attention_rate(gpu, 1 << 20).full_forward, 595e12);  // above 16k: clamped
  ClusterSpec shares = gpu;  // the two shares instead: one rate at every length, either mask
  shares.attention_by_seq.clear();
  shares.flash_forward_efficiency = 0.5;
  shares.flash_backward_efficiency = 0.4;
  const AttentionRate flat = attention_rate(shares, 3000);
  EXPECT_DOUBLE_EQ(flat.causal_forward, 0.5 * gpu.peak_flops);
  EXPECT_DOUBLE_EQ(flat.full_backward, 0.4 * gpu.peak_flops);

  // Selective recomputation repeats the core's forward: recompute_s is its time.
  ModelSpec m = model_preset("llama3-8b");  // 8K tokens, 32 heads of 128 (8 KV heads)
  LayerRun r;
  r.tensor_parallel = 2;  // 16 heads on this GPU
  r.tp_ranks_per_node = 2;
  r.recompute = Recompute::selective;
  // One call under the mask: 4·16·s²·128 / 2 FLOPs at the causal rate for s.
  const auto masked = [](double s) { return 4.0 * 16 * s * s * 128 / 2; };
  EXPECT_NEAR(layer_costs(m, gpu, r).recompute_s,
              gpu.kernel_launch_s + masked(8192) / at8k.causal_forward, 1e-12);
  m.seq_len = 4096;
  EXPECT_NEAR(layer_costs(m, gpu, r).recompute_s,
              gpu.kernel_launch_s + masked(4096) / at4k.causal_forward, 1e-12);
  m.seq_len = 8192;
  // The ring at c = 2: step 0 under the mask on the GPU's 4096 queries, step 1 unmasked at
  // 4096/√2, each a quarter of the whole sequence's masked work; each step's output (4096 tokens
  // x 2048 columns) merged in bf16.
  r.context_parallel = 2;
  r.cp_ranks_per_node = 2;
  const PieceCosts ring = layer_costs(m, gpu, r);
  const AttentionRate own = attention_rate(gpu, 4096);
  const AttentionRate half = attention_rate(gpu, 4096 / std::sqrt(2.0));
  const double step = masked(8192) / 4;
  EXPECT_NEAR(ring.recompute_s,
              2 * gpu.kernel_launch_s + step / own.causal_forward + step / half.full_forward +
                  2 * memory_s(gpu, 6.0 * 4096 * 2048),
              1e-12);
  // Without the mask every step is the GPU's queries against a whole chunk, unmasked.
  r.causal = false;
  EXPECT_NEAR(layer_costs(m, gpu, r).recompute_s,
              2 * gpu.kernel_launch_s + 2 * (2 * step) / own.full_forward +
                  2 * memory_s(gpu, 6.0 * 4096 * 2048),
              1e-12);
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

// Pipeline sends waited on (Megatron-LM without P2P overlap, and its non-interleaved 1F1B
// always) hold each sender until its message arrives: a longer step, by nothing when the messages
// cost nothing.
TEST(PlanEvaluate, PipelineSendsWaitedOnHoldTheSender) {
  PlanConfig c = llama70b_on_h100();  // pipeline neighbours 16 GPUs apart: on the network
  EXPECT_FALSE(c.p2p_overlapped());   // 1F1B's runtimes wait on its sends
  EXPECT_TRUE(ConfigCosts(c).cost_model(default_partition(c)).blocking_sends);
  EXPECT_FALSE(plan_json(evaluate(c))["overlap_p2p"].get<bool>());
  c.kind = "interleaved";
  c.chunks = 2;
  EXPECT_TRUE(c.p2p_overlapped());  // Megatron-LM's interleaved schedule overlaps them
  const PlanResult overlapped = evaluate(c);
  EXPECT_FALSE(ConfigCosts(c).cost_model(default_partition(c)).blocking_sends);
  c.overlap_p2p = false;
  const PlanResult waited = evaluate(c);
  EXPECT_TRUE(ConfigCosts(c).cost_model(default_partition(c)).blocking_sends);
  EXPECT_GT(waited.step_s, overlapped.step_s);
  EXPECT_THAT(plan_text(waited), HasSubstr("pipeline sends waited on"));
  // Free messages: waiting for them costs nothing.
  c.cluster.network.latency_s = 1e-30;
  c.cluster.network.bandwidth_bytes_per_s = 1e30;
  const PlanResult free_waited = evaluate(c);
  c.overlap_p2p = true;
  EXPECT_NEAR(free_waited.step_s, evaluate(c).step_s, 1e-12 * free_waited.step_s);
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

// DualPipeV's overlapped pairs hide each pass's exposed tensor-parallel collectives behind the
// other's compute: the same order with its pairs run back to back is slower, by at most what the
// collectives take; too few micro-batches for its warm-up are refused.
TEST(PlanEvaluate, DualPipeVHidesCommunicationInItsPairs) {
  PlanConfig c = llama70b_on_h100();
  c.global_batch = 64;  // d = 2: M = 32 micro-batches for 8 model stages on 4 devices
  c.kind = "dualpipev";
  c.chunks = 2;
  SimResult sim;
  const Schedule paired = generate_schedule("dualpipev", c.pp, 32, 1);
  const PlanResult overlapped = evaluate(c, {}, sim, &paired);
  Schedule apart = paired;
  for (auto& list : apart.devices)
    for (Action& a : list) a.overlap = Overlap::none;
  const PlanResult serial = evaluate(c, {}, sim, &apart);
  EXPECT_EQ(evaluate(c).step_s, overlapped.step_s);  // the generated schedule is this one
  EXPECT_LT(overlapped.step_s, serial.step_s);
  double comm = 0;  // every pass's collectives, the most the pairs could hide
  for (const StagePlan& st : overlapped.stages)
    comm += 32 * (st.pieces.forward_comm_s + st.pieces.backward_comm_s);
  EXPECT_GT(comm, 0.0);
  EXPECT_LE(serial.step_s - overlapped.step_s, comm);
  c.global_batch = 14;  // d = 2, M = 7 < 2p
  refused(c, "--kind dualpipev needs at least 2p = 8 micro-batches a step");
}

// DualPipe holds two copies of the model: p model stages, device d holding copy 0's stage d and
// copy 1's stage p - 1 - d, so twice the layers' weights, gradients and optimizer state of
// DualPipeV's V on the same devices (derived from DualPipe's README table: both 2x a PP-stage
// 1F1B's, DualPipeV on PP/2 devices), about its bubble; before a
// step's update each stage's gradients come from its twin on the mirrored device. Odd p, too few
// or an odd count of micro-batches, and a partition of the schedule's 2p stages are refused.
TEST(PlanEvaluate, DualPipeHoldsTwoCopiesOfTheWeights) {
  PlanConfig c = llama70b_on_h100();
  c.global_batch = 64;  // d = 2: M = 32 micro-batches
  c.chunks = 2;
  c.kind = "dualpipev";
  const PlanResult v = evaluate(c);
  c.kind = "dualpipe";
  SimResult sim;
  const PlanResult two = evaluate(c, {.record_timeline = true}, sim);
  ASSERT_EQ(two.stages.size(), 8u);  // two copies of 4 model stages of 20 layers
  for (std::int32_t j = 0; j < 4; ++j) {
    const StagePlan& a = two.stages[static_cast<std::size_t>(j)];
    const StagePlan& b = two.stages[static_cast<std::size_t>(4 + j)];
    EXPECT_EQ(a.layers, 20);
    EXPECT_EQ(b.layers, a.layers);
    EXPECT_EQ(b.first_layer, a.first_layer);
    EXPECT_EQ(b.pieces.parameters, a.pieces.parameters);
    EXPECT_EQ(a.device, j);
    EXPECT_EQ(b.device, 3 - j);  // copy 1 runs back
    EXPECT_EQ(b.embedding, j == 0);
    EXPECT_EQ(b.head, j == 3);
  }
  // Devices 1 and 2 hold neither embedding nor head: 40 layers' state against DualPipeV's 20.
  const auto fixed = [](const PlanResult& r, std::int32_t device) {
    std::int64_t bytes = 0;
    for (std::size_t s = 0; s < r.stages.size(); ++s)
      if (r.stages[s].device == device) bytes += r.costs.stages[s].static_bytes();
    return bytes;
  };
  EXPECT_EQ(fixed(two, 1), 2 * fixed(v, 1));
  EXPECT_EQ(fixed(two, 2), 2 * fixed(v, 2));
  EXPECT_GT(two.peak_memory_bytes, v.peak_memory_bytes);
  EXPECT_NEAR(two.bubble_ratio, v.bubble_ratio, 0.05);
  // Every stage's update waits for its twin's whole gradient buffer, from the mirrored device.
  std::int32_t twins = 0;
  for (const auto& m : sim.timeline.messages)
    if (m.kind == DependencyKind::twin_gradients) {
      ++twins;
      EXPECT_EQ(m.dst_device, 3 - m.src_device);
      EXPECT_EQ(m.bytes,
                two.costs.stages[static_cast<std::size_t>(m.producer.stage)].gradient_bytes);
    }
  EXPECT_EQ(twins, 8);
  // Tied embeddings: each end device holds one copy's embedding and the other's head, the same
  // weights, so the head shares the embedding there (1F1B keeps a second copy on the last stage)
  // and no embedding all-reduce joins the update (the twins' exchange carries both halves).
  PlanConfig tied = c;
  tied.model.tied_embeddings = true;
  const PlanResult tied_two = evaluate(tied);
  tied.kind = "1f1b";
  tied.chunks = 1;
  const PlanResult tied_one = evaluate(tied);
  const std::int64_t head = padded_vocab(tied.model, tied.tp) / tied.tp * tied.model.d_model;
  EXPECT_EQ(tied_two.stages[3].pieces.parameters, tied_one.stages[3].pieces.parameters - head);
  EXPECT_EQ(tied_two.stages[7].pieces.parameters, tied_two.stages[3].pieces.parameters);
  EXPECT_LT(tied_two.costs.stages[0].update_s, tied_one.costs.stages[0].update_s);
  // Twins that share a node without being neighbours exchange over NVLink: 12 devices, 8 to a
  // node (t = d = 1), devices 4 and 7.
  PlanConfig wide = c;
  wide.tp = 1;
  wide.pp = 12;
  wide.gpus = 12;
  wide.global_batch = 24;
  const PlanResult twelve = evaluate(wide);
  const auto nvlink = [&](std::int32_t a, std::int32_t b) {
    return std::any_of(
        twelve.costs.links.begin(), twelve.costs.links.end(),
        [&](const LinkOverride& o) { return o.src_device == a && o.dst_device == b; });
  };
  EXPECT_TRUE(nvlink(4, 7));
  EXPECT_TRUE(nvlink(7, 4));
  EXPECT_FALSE(nvlink(3, 8));  // twins in two nodes: the network
  c.pp = 2;
  c.gpus = 32;  // d = 2, M = 32: DualPipe on two devices holds the whole model twice on each
  EXPECT_EQ(evaluate(c).stages.size(), 4u);
  c.pp = 4;
  c.gpus = 64;
  c.partition = {10, 10, 10, 10, 10, 10, 10, 10};
  refused(c, "--partition lists 8 stages, the pipeline has 4 (in each of dualpipe's two copies)");
  c.partition.clear();
  c.global_batch = 12;  // M = 6 < 2p
  refused(c, "--kind dualpipe needs an even number of micro-batches a step, at least 2p = 8");
  c.global_batch = 18;  // M = 9: odd
  refused(c, "got 9: a global batch of at least 16 sequences and a multiple of 4");
  c.global_batch = 64;
  c.pp = 5;
  c.gpus = 80;
  refused(c,
          "--kind dualpipe runs its two copies in opposite directions on an even number of "
          "devices, --pp 5 is odd");
  c.pp = 4;
  c.gpus = 64;
  c.chunks = 1;
  refused(c,
          "--kind dualpipe places two model stages on each device (one of each of its two "
          "copies): --chunks 2, not 1");
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
