// paci plan's cost model for mixtures of experts (docs/costmodel.md, "Mixture of experts"): the
// routed tokens' GEMMs and all-to-alls, the experts' state over their replicas, and DeepSeek-V3's
// heterogeneous stages (dense first layers, multi-head latent attention, multi-token prediction).
// The dense model's knobs: test_evaluate.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include "plan/costs/costs.hpp"
#include "plan/evaluate/evaluate.hpp"
#include "tests/plan/evaluate_fixtures.hpp"

namespace paci::plan {
namespace {

// A mixture of experts (docs/costmodel.md, "Mixture of experts"): E experts of width f, each
// token routed to k; with expert parallelism e each GPU holds E/e whole experts, runs the busiest
// GPU's k·T/t token copies through them and sends and takes back each copy by all-to-all; the
// experts' state is sharded over an expert's t·c·d/e replicas.
TEST(PlanEvaluate, ExpertsRunTheRoutedTokensAndShardOverTheirReplicas) {
  const ModelSpec m = model_preset("mixtral-8x7b");
  const ClusterSpec gpu = cluster_preset("h100-80gb");
  LayerRun r = sequence_parallel_run(2);
  const PieceCosts one = layer_costs(m, gpu, r);  // e = 1: every expert here, no all-to-all
  r.expert_parallel = 8;
  r.ep_ranks_per_node = 8;
  const PieceCosts eight = layer_costs(m, gpu, r);
  const std::int64_t expert = 3LL * 4096 * 14336;
  EXPECT_EQ(one.expert_parameters, 8 * expert);
  EXPECT_EQ(eight.expert_parameters, expert);
  EXPECT_EQ(one.parameters - eight.parameters, 7 * expert);
  // The same token copies through one expert instead of eight: the same GEMM FLOPs, in one
  // larger GEMM; what e adds is the four all-to-alls (dispatch, combine, and their backward) of
  // the k copies of T/t tokens, bf16.
  const double copies = 2.0 * 4096 / 2;  // k x T / t, b = 1, s = 4096
  const double a2a = all_to_all_s(gpu, 2.0 * copies * 4096, 8, 8);
  EXPECT_NEAR(eight.forward_comm_s - one.forward_comm_s, 2 * a2a, 1e-12);
  EXPECT_NEAR(eight.backward_comm_s - one.backward_comm_s, 2 * a2a, 1e-12);
  // Eight experts of 512 copies or one of 4096: the same FLOPs, both filling the GPU.
  EXPECT_NEAR(eight.weight_grad_s, one.weight_grad_s, 1e-12);
  // No shared expert: the MLP side has no tensor-parallel collectives (the tokens stay
  // sequence-sharded), where a dense layer of the same attention has a pair each way.
  ModelSpec dense = model_preset("llama3-8b");  // Mixtral 8x7B's attention shapes
  dense.seq_len = m.seq_len;
  LayerRun dr = r;
  dr.expert_parallel = 1;
  EXPECT_NEAR(layer_costs(dense, gpu, dr).forward_comm_s, 2 * one.forward_comm_s, 1e-12);
  // A load of 1.5 on the busiest GPU: half as much expert work again, and activations.
  r.expert_load = 1.5;
  const PieceCosts loaded = layer_costs(m, gpu, r);
  EXPECT_GT(loaded.forward_s, eight.forward_s);
  EXPECT_GT(loaded.activation_bytes, eight.activation_bytes);
  // Each all-to-all waits for the busiest GPU, which receives (and sends back) 1.5 times the mean.
  EXPECT_NEAR(loaded.forward_comm_s - one.forward_comm_s,
              2 * all_to_all_s(gpu, 1.5 * 2.0 * copies * 4096, 8, 8), 1e-12);

  // The experts' state over their replicas: 16 GPUs, t = 2, p = 1: d = 8; e = 8 leaves each
  // expert on 2 GPUs (t·d/e), the rest of the layer on d = 8.
  PlanConfig c;
  c.model = m;
  c.cluster = gpu;
  c.gpus = 16;
  c.global_batch = 32;
  c.tp = 2;
  c.ep = 8;
  c.sequence_parallel = true;
  c.zero = 1;
  c.recompute = Recompute::full;
  const PlanResult p = evaluate(c);
  const StagePlan& sp = p.stages[0];
  const std::int64_t experts = sp.pieces.expert_parameters, rest = sp.pieces.parameters - experts;
  EXPECT_EQ(experts, 32 * expert);
  EXPECT_EQ(p.costs.stages[0].optimizer_bytes, (12 * rest + 7) / 8 + (12 * experts + 1) / 2);
  // MFU counts the active parameters (2 of the 8 experts) and the attention at a·d per token.
  const ParamCounts counts = parameter_counts(m);
  EXPECT_LT(counts.active_per_layer, counts.per_layer / 3);
  const double tokens = 32.0 * 4096, L = 32;
  EXPECT_NEAR(p.model_flops_per_step,
              tokens * (6.0 * (L * static_cast<double>(counts.active_per_layer) + 32000.0 * 4096) +
                        12.0 * L * 4096 * 4096),
              1e3);
  // Qwen3's heads are wider than h/a: the attention's FLOPs follow a·d = 4096, not h = 2048.
  PlanConfig qwen = c;
  qwen.model = model_preset("qwen3-30b-a3b");
  qwen.ep = 16;
  qwen.tp = 1;
  qwen.sequence_parallel = false;
  const PlanResult wide = evaluate(qwen);
  const ParamCounts qc = parameter_counts(qwen.model);
  EXPECT_NEAR(wide.model_flops_per_step,
              tokens * (6.0 * (48.0 * static_cast<double>(qc.active_per_layer) + 151936.0 * 2048) +
                        12.0 * 48 * 4096 * 4096),
              1e3);

  // Bad input: one line naming the knob.
  PlanConfig bad = c;
  bad.ep = 3;
  refused(bad, "--ep 3 must divide the model's 8 experts");
  bad.ep = 8;
  bad.gpus = 8;
  bad.global_batch = 16;
  bad.tp = 2;
  bad.pp = 2;  // t·c·d = 4
  refused(bad, "--ep 8 must divide the 4 GPUs that hold a pipeline stage");
  bad = c;
  bad.sequence_parallel = false;
  refused(bad, "needs --sequence-parallel");
  bad = c;
  bad.zero = 3;
  refused(bad, "Megatron-LM's FSDP does not run with expert parallelism");
  bad = c;
  bad.model = model_preset("llama3-8b");
  refused(bad, "has none (--experts E");
  bad = c;
  bad.expert_load = 0.5;
  refused(bad, "it is at least 1");
  bad.expert_load = 9;  // above e = 8: more than every copy on one GPU
  refused(bad, "--expert-load 9 with --ep 8: the busiest of 8 GPUs receives at most 8 times");
  // With experts t splits only the shared expert: an expert width t does not divide is fine.
  PlanConfig odd = c;
  odd.model.ffn = 14335;
  EXPECT_NO_THROW(check_config(odd));
  odd.model.shared_expert_ffn = 1001;
  refused(odd, "--tp 2 does not divide the model's shared expert's width (1001)");
}

// DeepSeek-V3's heterogeneous stages: the first dense layers cost a dense layer's time and
// weights where they sit, the multi-token-prediction module runs on the last stage with a copy of
// the embedding there, and every parameter is on exactly one stage (the copy aside).
TEST(PlanEvaluate, DenseFirstLayersAndThePredictionModuleSitOnTheirStages) {
  PlanConfig c;
  c.model = model_preset("deepseek-v3");
  c.cluster = cluster_preset("b200");
  c.gpus = 16;
  c.global_batch = 16;
  c.pp = 16;
  c.partition = {4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 1};
  c.zero = 1;
  const ConfigCosts costs(c);
  std::vector<StagePlan> stages;
  costs.cost_model(c.partition, &stages);
  const ParamCounts counts = parameter_counts(c.model);
  std::int64_t held = 0;
  for (const StagePlan& sp : stages) held += sp.pieces.parameters;
  EXPECT_EQ(held, counts.total + 129280 * 7168);  // the embedding's copy on the last stage
  // Stage 0: the embedding, 3 dense layers and a routed one; stage 1: 4 routed layers.
  const std::int64_t embedding = 129280LL * 7168;
  EXPECT_EQ(stages[0].pieces.parameters, embedding + 3 * counts.dense_per_layer + counts.per_layer);
  EXPECT_EQ(stages[1].pieces.parameters, 4 * counts.per_layer);
  // The last: one layer, the final norm and head, the module (a layer, its projection and norms)
  // and the embedding's copy.
  EXPECT_EQ(stages[15].pieces.parameters,
            counts.per_layer + 7168 + embedding + counts.mtp + embedding);
  // A dense layer's MLP (18432 wide) is not a routed layer's experts: the first stage's layers
  // cost what their kinds do.
  const LayerRun run = [&] {
    LayerRun r;
    r.flash_attention = true;
    r.causal = true;
    return r;
  }();
  const PieceCosts routed = layer_costs(c.model, c.cluster, run);
  const PieceCosts dense = layer_costs(c.model.dense_part(), c.cluster, run);
  // On one GPU (t = 1, e = 1) each holds its layer's whole count.
  EXPECT_EQ(routed.parameters, counts.per_layer);
  EXPECT_EQ(dense.parameters, counts.dense_per_layer);
  EXPECT_EQ(dense.expert_parameters, 0);
  // Tensor parallelism: MLA's attention gathers its latents (1536 + 512 + 64 columns a token)
  // where a plain attention gathers the h-wide input, and reduce-scatters their gradient
  // (sequence parallelism); without sequence parallelism its backward all-reduces that gradient.
  {
    LayerRun tp = run;
    tp.tensor_parallel = 8;
    tp.tp_ranks_per_node = 8;
    tp.sequence_parallel = true;
    ModelSpec plain = c.model;
    plain.q_lora_rank = plain.kv_lora_rank = plain.rope_head_width = 0;
    const ClusterSpec& gpu = c.cluster;
    const auto one = [&](Collective kind, double width) {
      return collective_s(gpu, kind, 2.0 * 4096 * width, 8, 8);
    };
    PieceCosts mla = layer_costs(c.model, gpu, tp), mha = layer_costs(plain, gpu, tp);
    EXPECT_NEAR(mla.forward_comm_s - mha.forward_comm_s,
                one(Collective::all_gather, 2112) - one(Collective::all_gather, 7168), 1e-12);
    EXPECT_NEAR(mla.backward_comm_s - mha.backward_comm_s,
                one(Collective::reduce_scatter, 2112) - one(Collective::reduce_scatter, 7168),
                1e-12);
    tp.sequence_parallel = false;
    mla = layer_costs(c.model, gpu, tp);
    mha = layer_costs(plain, gpu, tp);
    EXPECT_NEAR(mla.forward_comm_s, mha.forward_comm_s, 1e-12);
    EXPECT_NEAR(mla.backward_comm_s - mha.backward_comm_s,
                one(Collective::all_reduce, 2112) - one(Collective::all_reduce, 7168), 1e-12);
  }
  const double stage0 = stages[0].pieces.forward_s - costs.stage(0, 0, 0).pieces.forward_s;
  EXPECT_NEAR(stage0, 3 * dense.forward_s + routed.forward_s, 1e-9);
  // Without the module the last stage is one layer and the head, and the embedding stays first.
  PlanConfig plain = c;
  plain.model.mtp_layers = 0;
  std::vector<StagePlan> without;
  ConfigCosts(plain).cost_model(plain.partition, &without);
  EXPECT_EQ(without[15].pieces.parameters, counts.per_layer + 7168 + embedding);
  EXPECT_LT(without[15].pieces.forward_s, stages[15].pieces.forward_s);
  // Model FLOPs: every layer's active parameters, the module's layer, projection and head, and
  // MLA's attention at a·(d_qk + d) per token and layer (unmasked, as Megatron-LM counts).
  const PlanResult r = evaluate(c);
  const double tokens = 16.0 * 4096, head = 129280.0 * 7168;
  EXPECT_NEAR(r.model_flops_per_step,
              tokens * (6.0 * (static_cast<double>(counts.active_layers) + 2 * head) +
                        6.0 * 62 * 4096 * 128 * (192 + 128)),
              1e6);
  // ZeRO 3 gathers the module's layer as a layer, and its projection, norms and the embedding's
  // copy with the head (a dense model with a module: Megatron-LM's FSDP runs no experts): the
  // last stage's largest piece, whose buffers ZeRO 3 holds (two gathered, one unsharded fp32
  // gradient), is the head's, not the head and the module's layer together.
  PlanConfig fsdp;
  fsdp.model = model_preset("llama3-8b");
  fsdp.model.mtp_layers = 1;
  fsdp.cluster = cluster_preset("h100-80gb");
  fsdp.gpus = 8;
  fsdp.global_batch = 16;
  fsdp.pp = 2;
  fsdp.zero = 3;
  std::vector<StagePlan> sharded;
  ConfigCosts(fsdp).cost_model(default_partition(fsdp), &sharded);
  const std::int64_t V = 128256, H = 4096;
  EXPECT_EQ(sharded[1].zero_workspace_bytes, (2 * 2 + 4) * (2 * V * H + H + 2 * H * H + 3 * H));
  // Tensor parallelism splits the dense layers' MLP too.
  PlanConfig odd = c;
  odd.tp = 2;
  odd.gpus = 32;
  odd.model.dense_ffn = 18431;
  refused(odd, "--tp 2 does not divide the model's dense layers' MLP width (18431)");
}

}  // namespace
}  // namespace paci::plan
