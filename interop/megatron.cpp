// megatron_args: the plan as Megatron-LM flags.
#include "interop/megatron.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "base/errors.hpp"

namespace paci::interop {

std::string megatron_refusal(const plan::PlanConfig& c) {
  if (c.kind != "1f1b" && c.kind != "interleaved")
    return fmt::format(
        "Megatron-LM cannot run a {} schedule: it runs 1F1B and interleaved 1F1B only (no GPipe, "
        "zero-bubble, V-shaped, DualPipe or asynchronous schedule)",
        c.kind);
  if (c.zero >= 2)
    return fmt::format(
        "paci emits ZeRO {} for torchtitan's FSDP only: Megatron-LM's (--use-megatron-fsdp "
        "--data-parallel-sharding-strategy) is not checked yet; plan ZeRO 0 or 1 (--use-"
        "distributed-optimizer)",
        c.zero);
  if (c.pp > 1 && c.kind == "1f1b" && c.p2p_overlapped())
    return "Megatron-LM's non-interleaved 1F1B waits on every pipeline send (it refuses to overlap "
           "them): plan --overlap-p2p off, or --kind interleaved";
  if (c.kind == "interleaved" && c.pp <= 2 && !c.p2p_overlapped())
    return fmt::format(
        "Megatron-LM's interleaved schedule with its pipeline sends waited on needs more than 2 "
        "pipeline stages (validate_args), not {}: plan --overlap-p2p on, or --pp 3 or more",
        c.pp);
  return "";
}

std::string megatron_layout(const plan::PlanConfig& c, const std::vector<std::int32_t>& partition) {
  const auto S = static_cast<std::int64_t>(partition.size());
  const bool even = c.model.layers % S == 0 &&
                    std::all_of(partition.begin(), partition.end(),
                                [&](std::int32_t l) { return l == c.model.layers / S; });
  if (even) return "";
  std::string layout = "E";
  for (std::size_t s = 0; s < partition.size(); ++s) {
    if (s > 0) layout += '|';
    layout.append(static_cast<std::size_t>(partition[s]), 't');
  }
  // Multi-token prediction sits on the last stage, after its layers and before the loss, where
  // paci's cost model puts it (megatron-core's layout letter m).
  layout.append(static_cast<std::size_t>(c.model.mtp_layers), 'm');
  return layout + "L";
}

std::vector<std::string> megatron_args(const plan::PlanResult& p) {
  const plan::PlanConfig& c = p.config;
  if (const std::string why = megatron_refusal(c); !why.empty()) throw InputError(why);
  const plan::ModelSpec& m = c.model;
  std::vector<std::string> a;
  const auto add = [&](std::string flag, auto value) {
    a.push_back(std::move(flag));
    a.push_back(fmt::format("{}", value));
  };
  add("--tensor-model-parallel-size", c.tp);
  if (c.cp > 1) {
    add("--context-parallel-size", c.cp);
    add("--cp-comm-type", c.cp_all_gather ? "all_gather" : "p2p");
  }
  add("--pipeline-model-parallel-size", c.pp);
  const std::string layout =
      megatron_layout(c, c.partition.empty() ? plan::default_partition(c) : c.partition);
  if (!layout.empty())
    add("--pipeline-model-parallel-layout", layout);  // the stage count sets the virtual stages
  else if (c.kind == "interleaved")
    add("--num-virtual-stages-per-pipeline-rank", c.chunks);
  // Interleaved: the pipeline sends overlap the next pass unless turned off (megatron-core's
  // --no-overlap-p2p-communication; it sets batch_p2p_comm, whose requests are all waited on; at
  // p <= 2 megatron_refusal has refused it).
  if (c.kind == "interleaved" && !c.p2p_overlapped()) a.push_back("--no-overlap-p2p-communication");
  add("--micro-batch-size", c.microbatch_size);
  add("--global-batch-size", c.global_batch);
  if (c.recompute == plan::Recompute::selective) add("--recompute-granularity", "selective");
  if (c.recompute == plan::Recompute::full) {
    add("--recompute-granularity", "full");
    add("--recompute-method", "uniform");
    add("--recompute-num-layers", 1);
  }
  if (c.sequence_parallel) a.push_back("--sequence-parallel");
  if (c.tp_comm_overlap) a.push_back("--tp-comm-overlap");
  // The distributed optimizer: ZeRO 1, or with one replica (nothing to shard) what FP8 weights and
  // the precision-aware optimizer run with.
  if (c.zero == 1 || (c.zero == 0 && (c.fp8_params || c.bf16_moments)))
    a.push_back("--use-distributed-optimizer");
  // HSDP: instances of the distributed optimizer, each sharding over shard_group replicas.
  if (c.zero == 1 && c.shard_group > 0 && c.shard_group < c.dp() * c.cp)
    add("--num-distributed-optimizer-instances", c.dp() * c.cp / c.shard_group);
  if (c.overlap_grad_reduce) a.push_back("--overlap-grad-reduce");
  // Activation offloading: validate_args turns --cpu-offloading on for a layer count above 0.
  if (c.offload_layers > 0) add("--cpu-offloading-num-layers", c.offload_layers);
  if (c.bf16_gradients) a.push_back("--grad-reduce-in-bf16");  // else fp32, validate_args' default
  a.push_back("--bf16");
  // FP8 GEMMs through Transformer Engine: per-tensor delayed scaling (E4M3 forward, E5M2
  // gradients) or MXFP8's block scaling.
  if (c.precision == plan::Precision::fp8) {
    add("--fp8-format", "hybrid");
    add("--fp8-recipe", "delayed");
  } else if (c.precision == plan::Precision::mxfp8) {
    add("--fp8-format", "e4m3");
    add("--fp8-recipe", "mxfp8");
  }
  if (c.fp8_params) a.push_back("--fp8-param-gather");
  // bf16 AdamW moments: the precision-aware optimizer (Transformer Engine's FusedAdam), the fp32
  // master weights kept.
  if (c.bf16_moments) {
    a.push_back("--use-precision-aware-optimizer");
    add("--exp-avg-dtype", "bf16");
    add("--exp-avg-sq-dtype", "bf16");
  }
  add("--num-layers", m.layers);
  add("--hidden-size", m.d_model);
  add("--num-attention-heads", m.heads);
  if (m.head_width > 0 && m.head_width * m.heads != m.d_model) add("--kv-channels", m.head_width);
  // With dense first layers (DeepSeek-V3's) --ffn-hidden-size is theirs; the experts' width is
  // --moe-ffn-hidden-size below.
  add("--ffn-hidden-size", m.dense_layers > 0 ? m.dense_ffn : m.ffn);
  add("--seq-length", m.seq_len);
  add("--max-position-embeddings", m.seq_len);
  // Fused attention as Transformer Engine chooses it (auto: cuDNN on Hopper and Blackwell,
  // FlashAttention on Ampere), the kernel whose rates the GPU presets carry.
  add("--attention-backend", c.flash_attention ? "auto" : "unfused");
  // Multi-head latent attention (DeepSeek-V3's): megatron-core's MLATransformerConfig with the
  // RMSNorms of the latents (--qk-layernorm, counted in paci's parameters) and DeepSeek-V3's YaRN
  // RoPE as its released config.json has it (factor 40, mscale 1.0 and mscale_all_dim 1.0 over
  // 4096 original positions, megatron-core's defaults for the rest); Megatron-LM's parser would
  // otherwise build YaRN with factor 1. Without a query latent (q_lora_rank 0) the queries come
  // from h directly: --q-lora-rank is left unset.
  if (m.mla()) {
    a.push_back("--multi-latent-attention");
    if (m.q_lora_rank > 0) add("--q-lora-rank", m.q_lora_rank);
    add("--kv-lora-rank", m.kv_lora_rank);
    add("--qk-head-dim", m.head_dim());
    add("--qk-pos-emb-head-dim", m.rope_head_width);
    add("--v-head-dim", m.head_dim());
    a.push_back("--qk-layernorm");
    add("--rope-type", "yarn");
    add("--rotary-scaling-factor", 40);
    add("--mscale", "1.0");
    add("--mscale-all-dim", "1.0");
  }
  if (m.kv_heads != m.heads) {
    a.push_back("--group-query-attention");
    add("--num-query-groups", m.kv_heads);
  }
  if (m.arch == plan::Arch::llama) {
    a.push_back("--swiglu");
    add("--normalization", "RMSNorm");
    add("--position-embedding-type", "rope");
    a.push_back("--disable-bias-linear");
    add("--hidden-dropout", 0);
    add("--attention-dropout", 0);
  }
  if (!m.tied_embeddings) a.push_back("--untie-embeddings-and-output-weights");
  // A mixture of experts as paci models it: every layer's MLP E experts of --ffn-hidden-size,
  // whole on each GPU of the expert-parallel group (expert tensor parallelism 1), a grouped GEMM,
  // the all-to-all dispatcher, the auxiliary load-balancing loss.
  if (m.moe()) {
    add("--num-experts", m.experts);
    add("--moe-router-topk", m.top_k);
    add("--moe-ffn-hidden-size", m.ffn);
    // Dense first layers, then experts in every layer (megatron-core's pattern: 0 dense, 1 MoE).
    if (m.dense_layers > 0)
      add("--moe-layer-freq",
          fmt::format("([0]*{}+[1]*{})", m.dense_layers, m.layers - m.dense_layers));
    if (m.shared_expert_ffn > 0) add("--moe-shared-expert-intermediate-size", m.shared_expert_ffn);
    add("--expert-model-parallel-size", c.ep);
    add("--expert-tensor-parallel-size", 1);
    a.push_back("--moe-grouped-gemm");
    add("--moe-token-dispatcher-type", "alltoall");
    if (m.router == plan::Router::deepseek_v3) {
      // DeepSeek-V3's router (plan/shapes/model.hpp): sigmoid scores, the bias that balances
      // the experts, 8 groups keeping 4, the scale, the sequence-wise loss; its scores in fp32,
      // as Megatron-Bridge's DeepSeek recipe and megatron-core's warning for many experts ask.
      add("--moe-router-score-function", "sigmoid");
      a.push_back("--moe-router-enable-expert-bias");
      add("--moe-router-bias-update-rate", "1e-3");
      add("--moe-router-num-groups", plan::kDeepSeekRouterGroups);
      add("--moe-router-group-topk", plan::kDeepSeekRouterGroupTopk);
      add("--moe-router-topk-scaling-factor", "2.5");
      add("--moe-router-dtype", "fp32");
      add("--moe-router-load-balancing-type", "seq_aux_loss");
      add("--moe-aux-loss-coeff", "1e-4");
    } else {
      // The type and its coefficient go together (TransformerConfig wants lists of one length);
      // megatron-core's default coefficient, 0, would leave the router unbalanced. 1e-2: NeMo's
      // Mixtral recipes' (nemo/collections/llm/gpt/model/mixtral.py, moe_aux_loss_coeff).
      add("--moe-router-load-balancing-type", "aux_loss");
      add("--moe-aux-loss-coeff", "1e-2");
    }
  }
  if (m.mtp_layers > 0) add("--mtp-num-layers", m.mtp_layers);
  return a;
}

std::vector<std::pair<std::string, std::string>> megatron_env(const plan::PlanConfig& c) {
  // Megatron-LM's validate_args asserts it for any t > 1 or c > 1 before Blackwell
  // (core_v0.16.1); on Blackwell the value is still accepted.
  if (c.tp > 1 || c.cp > 1) return {{"CUDA_DEVICE_MAX_CONNECTIONS", "1"}};
  return {};
}

}  // namespace paci::interop
