// The transformer presets (each shape and count checked against its published source in
// docs/costmodel.md, "Transformer shapes"), the shape checks, and the closed forms for parameter
// counts and per-layer activation bytes. Every product and sum is overflow-checked: a shape too
// large for 64-bit counts is an InputError, never a wrapped number.
#include "plan/shapes/model.hpp"

#include <fmt/format.h>

#include <initializer_list>
#include <utility>

#include "schedules/ir.hpp"

namespace paci::plan {

namespace {

// Letters as in docs/costmodel.md: L layers, h d_model, a heads, g kv_heads, d head_dim, kv the
// width of K (= g·d), f ffn, V vocab, s seq_len, b micro-batch size, t tensor-parallel size.

[[noreturn]] void overflow() {
  throw InputError("the model shape is too large: a parameter or byte count overflows 64 bits");
}

std::int64_t product(std::initializer_list<std::int64_t> factors) {
  std::int64_t out = 1;
  for (const std::int64_t f : factors)
    if (__builtin_mul_overflow(out, f, &out)) overflow();
  return out;
}

std::int64_t sum(std::initializer_list<std::int64_t> terms) {
  std::int64_t out = 0;
  for (const std::int64_t t : terms)
    if (__builtin_add_overflow(out, t, &out)) overflow();
  return out;
}

// ⌈n / t⌉ for n >= 0, t >= 1: the largest share of n things split over t GPUs.
std::int64_t ceil_div(std::int64_t n, std::int64_t t) {
  return n / t + (n % t != 0 ? 1 : 0);
}

ModelSpec gpt(std::string name, std::int64_t layers, std::int64_t d_model, std::int64_t heads,
              std::int64_t seq_len) {
  ModelSpec m;
  m.name = std::move(name);
  m.arch = Arch::gpt;
  m.layers = layers;
  m.d_model = d_model;
  m.heads = heads;
  m.kv_heads = heads;
  m.ffn = 4 * d_model;
  m.vocab = 50257;
  m.seq_len = seq_len;
  m.tied_embeddings = true;
  return m;
}

ModelSpec llama(std::string name, std::int64_t layers, std::int64_t d_model, std::int64_t heads,
                std::int64_t kv_heads, std::int64_t ffn, std::int64_t vocab, std::int64_t seq_len) {
  ModelSpec m;
  m.name = std::move(name);
  m.arch = Arch::llama;
  m.layers = layers;
  m.d_model = d_model;
  m.heads = heads;
  m.kv_heads = kv_heads;
  m.ffn = ffn;
  m.vocab = vocab;
  m.seq_len = seq_len;
  m.tied_embeddings = false;
  return m;
}

ModelSpec moe(ModelSpec m, std::int64_t experts, std::int64_t top_k) {
  m.experts = experts;
  m.top_k = top_k;
  return m;
}

ModelSpec heads_of(ModelSpec m, std::int64_t width) {
  m.head_width = width;
  return m;
}

ModelSpec deepseek_v3();

std::vector<ModelSpec> make_presets() {
  return {
      // GPT-2 (Radford et al. 2019; the released checkpoints' hparams / HF config.json).
      gpt("gpt2-small", 12, 768, 12, 1024),
      gpt("gpt2-medium", 24, 1024, 16, 1024),
      gpt("gpt2-large", 36, 1280, 20, 1024),
      gpt("gpt2-xl", 48, 1600, 25, 1024),
      // GPT-3 (Brown et al. 2020, Table 2.1; n_ctx 2048, d_ff = 4·d_model, GPT-2's tokenizer).
      // Two rows of the table do not multiply out (n_heads·d_head != d_model): 1.3b lists 24
      // heads of 128 with d_model 2048 (we keep d_head 128: 16 heads), 13b lists d_model 5140
      // with 40 heads of 128 (we read 5120). docs/costmodel.md says more.
      gpt("gpt3-125m", 12, 768, 12, 2048),
      gpt("gpt3-350m", 24, 1024, 16, 2048),
      gpt("gpt3-760m", 24, 1536, 16, 2048),
      gpt("gpt3-1.3b", 24, 2048, 16, 2048),
      gpt("gpt3-2.7b", 32, 2560, 32, 2048),
      gpt("gpt3-6.7b", 32, 4096, 32, 2048),
      gpt("gpt3-13b", 40, 5120, 40, 2048),
      gpt("gpt3-175b", 96, 12288, 96, 2048),
      // Llama 2 (Touvron et al. 2023; meta-llama/Llama-2-*-hf config.json).
      llama("llama2-7b", 32, 4096, 32, 32, 11008, 32000, 4096),
      llama("llama2-13b", 40, 5120, 40, 40, 13824, 32000, 4096),
      llama("llama2-70b", 80, 8192, 64, 8, 28672, 32000, 4096),
      // Llama 3 / 3.1 (Llama Team 2024; meta-llama/Llama-3.1-*/config.json), at the
      // 8192-token pre-training length (3.1's 128K comes from a later long-context stage).
      llama("llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192),
      llama("llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192),
      llama("llama3-405b", 126, 16384, 128, 8, 53248, 128256, 8192),
      // Mixtral (Jiang et al. 2024; the base models' config.json, Mixtral-8x7B-v0.1 and
      // Mixtral-8x22B-v0.1: num_local_experts 8, num_experts_per_tok 2, intermediate_size each
      // expert's, vocabulary 32000), at a 4096-token pre-training length (their configs allow
      // 32K and 64K).
      moe(llama("mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000, 4096), 8, 2),
      moe(llama("mixtral-8x22b", 56, 6144, 48, 8, 16384, 32000, 4096), 8, 2),
      // Qwen3 MoE (Qwen Team 2025, arXiv 2505.09388; Qwen/Qwen3-30B-A3B and Qwen3-235B-A22B
      // config.json: head_dim 128, num_experts 128, num_experts_per_tok 8, moe_intermediate_size
      // each expert's, every layer MoE), at the 4096 tokens Megatron-Bridge's benchmarks train.
      // Their per-head q and k RMSNorms (2·128 weights a layer) are not counted.
      heads_of(moe(llama("qwen3-30b-a3b", 48, 2048, 32, 4, 768, 151936, 4096), 128, 8), 128),
      heads_of(moe(llama("qwen3-235b-a22b", 94, 4096, 64, 4, 1536, 151936, 4096), 128, 8), 128),
      deepseek_v3(),
  };
}

// DeepSeek-V3 (DeepSeek-AI 2024, arXiv 2412.19437, section 4.2; deepseek-ai/DeepSeek-V3's
// config.json): 61 layers of h = 7168, MLA with 128 heads (q_lora_rank 1536, kv_lora_rank 512,
// qk_nope_head_dim = v_head_dim = 128, qk_rope_head_dim 64), the first 3 layers dense (18432
// wide), the other 58 with 256 routed experts of 2048, 8 per token, and one shared expert of
// 2048; vocabulary 129280, untied; pre-trained at 4K tokens; one multi-token-prediction module
// (section 2.2: depth 1), 11.6B of its own beside the shared embedding and head. The router's
// bias terms (256 a layer) are not counted: 671.0B parameters without the module (the report:
// 671B, 37B active), 682.6B with it (its README: 685B with the module's copies of the embedding
// and head).
ModelSpec deepseek_v3() {
  ModelSpec m =
      heads_of(moe(llama("deepseek-v3", 61, 7168, 128, 128, 2048, 129280, 4096), 256, 8), 128);
  m.shared_expert_ffn = 2048;
  m.dense_layers = 3;
  m.dense_ffn = 18432;
  m.q_lora_rank = 1536;
  m.kv_lora_rank = 512;
  m.rope_head_width = 64;
  m.mtp_layers = 1;
  m.router = Router::deepseek_v3;
  return m;
}

ParamCounts counts_of(const ModelSpec& m) {
  const std::int64_t h = m.d_model, kv = m.kv_dim(), q = m.q_dim();
  ParamCounts p;
  p.embedding = product({m.vocab, h});
  // One MLP of width w: gpt h·w + w + w·h + h, llama's SwiGLU gate, up and down 3·h·w.
  const auto mlp = [&](std::int64_t w) {
    if (w == 0) return std::int64_t{0};
    return m.arch == Arch::gpt ? sum({product({2, h, w}), w, h}) : product({3, h, w});
  };
  std::int64_t rest = 0;  // a layer without its MLP
  if (m.mla()) {
    // MLA: the query latent's projection h·r_q, its RMSNorm r_q and the up-projection r_q·a(d+r)
    // (without a query latent one projection h·a(d+r)); the keys' and values' latent with the
    // shared rotary key h·(r_kv + r), its RMSNorm r_kv, the up-projection r_kv·a(d + d); the
    // output a·d·h; two RMSNorm weights 2h.
    const std::int64_t a = m.heads, d = m.head_dim(), qk = sum({d, m.rope_head_width});
    const std::int64_t queries =
        m.q_lora_rank > 0
            ? sum({product({h, m.q_lora_rank}), m.q_lora_rank, product({m.q_lora_rank, a, qk})})
            : product({h, a, qk});
    rest = sum({queries, product({h, sum({m.kv_lora_rank, m.rope_head_width})}), m.kv_lora_rank,
                product({m.kv_lora_rank, a, 2, d}), product({a, d, h}), product({2, h})});
    p.positions = 0;
    p.final_norm = h;
  } else if (m.arch == Arch::gpt) {
    // QKV h·(q + 2kv) + (q + 2kv), projection q·h + h, two LayerNorms 2·2h (weight and bias).
    // With q = kv = h and the MLP of f = 4h: 12h² + 13h.
    const std::int64_t qkv_width = sum({q, product({2, kv})});
    rest = sum({product({h, qkv_width}), qkv_width, product({q, h}), h, product({4, h})});
    p.positions = product({m.seq_len, h});
    p.final_norm = product({2, h});
  } else {
    // q h·q, k and v h·kv each, o q·h, two RMSNorm weights 2h (q = h unless the heads' width is
    // given).
    rest = sum({product({2, h, q}), product({2, h, kv}), product({2, h})});
    p.positions = 0;
    p.final_norm = h;
  }
  const std::int64_t routed = m.layers - m.dense_layers;
  if (!m.moe()) {
    p.per_layer = p.active_per_layer = sum({rest, mlp(m.ffn)});
  } else {
    // The router h·E, E experts, the shared expert; a token computes with k of the experts.
    const std::int64_t common = sum({rest, product({h, m.experts}), mlp(m.shared_expert_ffn)});
    p.expert_per_layer = product({m.experts, mlp(m.ffn)});
    p.per_layer = sum({common, p.expert_per_layer});
    p.active_per_layer = sum({common, product({m.top_k, mlp(m.ffn)})});
    if (m.dense_layers > 0) p.dense_per_layer = sum({rest, mlp(m.dense_ffn)});
  }
  // Each multi-token-prediction module: a layer like the last, the 2h -> h projection, three
  // RMSNorms.
  const std::int64_t projection = product({2, h, h});
  p.mtp = product({m.mtp_layers, sum({p.per_layer, projection, product({3, h})})});
  p.active_layers =
      sum({product({routed, p.active_per_layer}), product({m.dense_layers, p.dense_per_layer}),
           product({m.mtp_layers, sum({p.active_per_layer, projection})})});
  p.head = m.tied_embeddings ? 0 : p.embedding;
  p.total = sum({p.embedding, p.positions, product({routed, p.per_layer}),
                 product({m.dense_layers, p.dense_per_layer}), p.final_norm, p.head, p.mtp});
  return p;
}

std::int64_t activation_bytes_of(const ModelSpec& m, const ActivationOptions& o) {
  const std::int64_t s = m.seq_len, b = o.microbatch_size, h = m.d_model, t = o.tensor_parallel;
  const std::int64_t d = m.head_dim();
  // One GPU's share of what tensor parallelism splits: heads (query and K/V; a K/V head is
  // replicated when t > g) and the MLP's hidden width; with sequence parallelism also the
  // sequence, in the regions tensor parallelism replicates (norms, dropouts, residuals). Each
  // rounded up: the largest share, and the paper's sbh/t exactly when t divides evenly.
  const std::int64_t a_t = ceil_div(m.heads, t), kv_t = product({ceil_div(m.kv_heads, t), d});
  const std::int64_t q_t = product({a_t, d}), f_t = ceil_div(m.ffn, t);
  const std::int64_t s_rep = o.sequence_parallel ? ceil_div(s, t) : s;
  const std::int64_t sb = product({s, b}), sb_rep = product({s_rep, b});

  if (o.recompute == Recompute::full) return product({2, sb_rep, h});  // the layer's input

  const bool is_gpt = m.arch == Arch::gpt;
  // Replicated without sequence parallelism: the two norm inputs 4sbh, the QKV input 2sbh and the
  // MLP input 2sbh (norm outputs), and in gpt the two 1-byte dropout masks after the attention
  // and MLP output projections 2sbh.
  const std::int64_t replicated = product({is_gpt ? 10 : 8, sb_rep, h});
  // Split by heads or MLP width: Q 2sbh, K and V 4sb·kv, the output projection's input 2sbh;
  // gpt: the GeLU input and the second linear's input 2sbf each; llama: the gate and up outputs
  // 4sbf and their product (the down projection's input) 2sbf.
  // With experts (each whole on its GPU, the tokens sequence-sharded over t as Megatron-LM's MoE
  // needs): the k copies of this GPU's T/t tokens, times the busiest GPU's load, through the
  // same MLP of width f, their permuted input 2·k·T/t·h, the router's fp32 probabilities
  // 4·T/t·E, and the shared expert split by t like a dense MLP.
  const std::int64_t copies =
      m.moe() ? static_cast<std::int64_t>(static_cast<double>(product({m.top_k, ceil_div(sb, t)})) *
                                          o.expert_load)
              : 0;
  const std::int64_t mlp_term =
      m.moe() ? sum({product({is_gpt ? 4 : 6, copies, m.ffn}), product({2, copies, h}),
                     product({4, ceil_div(sb, t), m.experts}),
                     product({is_gpt ? 4 : 6, sb, ceil_div(m.shared_expert_ffn, t)})})
              : product({is_gpt ? 4 : 6, sb, f_t});
  // MLA: Q and K a(d + r) wide, V and the output projection's input a·d, and, whole in width on
  // every GPU of the group (sequence-sharded with sequence parallelism, as the down-projections
  // run and the up-projections keep their inputs), the latents: the query latent and the keys'
  // latent with the rotary key before their RMSNorms, and the two norms' outputs.
  const std::int64_t attention_term =
      m.mla() ? sum({product({4, sb, a_t, sum({d, m.rope_head_width})}), product({4, sb, a_t, d}),
                     product({2, sb_rep, sum({m.q_lora_rank, m.kv_lora_rank, m.rope_head_width})}),
                     product({2, sb_rep, sum({m.q_lora_rank, m.kv_lora_rank})})})
              : sum({product({4, sb, q_t}), product({4, sb, kv_t})});
  const std::int64_t split = sum({attention_term, mlp_term});
  // The attention core. Standard: the s x s matrices per head, gpt the softmax output 2as²b, its
  // dropout mask as²b and the dropout output 2as²b, llama the softmax output 2as²b. Selective
  // recomputation recomputes them from Q, K, V; FlashAttention never stores them and keeps its
  // fp32 softmax statistics (one log-sum-exp per head and token: 4asb), the dropout mask
  // regenerated from the RNG state.
  std::int64_t core = 0;
  if (o.recompute == Recompute::none)
    core = o.flash_attention ? product({4, a_t, sb}) : product({is_gpt ? 5 : 2, a_t, s, sb});
  // FP8: the QKV and first MLP inputs (sbh each, sequence-sharded with SP), the attention output
  // projection's input (sb·h/t) and the second MLP GEMM's (sb·f/t) kept in 8 bits, a byte saved
  // per element.
  const std::int64_t second_mlp_input =
      m.moe() ? sum({product({copies, m.ffn}), product({sb, ceil_div(m.shared_expert_ffn, t)})})
              : product({sb, f_t});
  // With experts the MLP side's norm output feeds the bf16 router; the experts' first GEMM input
  // kept in 8 bits is the permuted copies (and the shared expert's, the norm output).
  const std::int64_t first_mlp_input =
      m.moe() ? sum({copies * h, m.shared_expert_ffn > 0 ? sb_rep * h : 0}) : sb_rep * h;
  // MLA: its up-projections' inputs (the latents after their norms) in 8 bits too.
  const std::int64_t fp8_saved =
      o.fp8_linear_inputs
          ? sum({product({sb_rep, h}), first_mlp_input, product({sb, q_t}), second_mlp_input,
                 m.mla() ? product({sb_rep, sum({m.q_lora_rank, m.kv_lora_rank})}) : 0})
          : 0;
  return sum({replicated, split, core}) - fp8_saved;
}

std::string preset_names() {
  std::string out;
  for (const ModelSpec& m : model_presets()) out += (out.empty() ? "" : ", ") + m.name;
  return out;
}

}  // namespace

std::string_view to_string(Arch arch) {
  return arch == Arch::gpt ? "gpt" : "llama";
}

std::string_view to_string(Router router) {
  return router == Router::softmax ? "softmax" : "deepseek-v3";
}

Router parse_router(std::string_view text) {
  if (text == "softmax") return Router::softmax;
  if (text == "deepseek-v3") return Router::deepseek_v3;
  throw InputError(fmt::format("unknown router '{}' (expected softmax or deepseek-v3)", text));
}

Arch parse_arch(std::string_view text) {
  if (text == "gpt") return Arch::gpt;
  if (text == "llama") return Arch::llama;
  throw InputError(fmt::format("unknown architecture '{}' (expected gpt or llama)", text));
}

std::string_view to_string(Recompute recompute) {
  switch (recompute) {
    case Recompute::none:
      return "none";
    case Recompute::selective:
      return "selective";
    case Recompute::full:
      return "full";
  }
  return "?";
}

Recompute parse_recompute(std::string_view text) {
  if (text == "none") return Recompute::none;
  if (text == "selective") return Recompute::selective;
  if (text == "full") return Recompute::full;
  throw InputError(
      fmt::format("unknown recomputation '{}' (expected none, selective or full)", text));
}

const std::vector<ModelSpec>& model_presets() {
  static const std::vector<ModelSpec> presets = make_presets();
  return presets;
}

ModelSpec model_preset(std::string_view name) {
  for (const ModelSpec& m : model_presets())
    if (m.name == name) return m;
  throw InputError(fmt::format("unknown model preset '{}' (known: {})", name, preset_names()));
}

ModelSpec resolve_model(const std::optional<std::string>& preset, const ModelOverrides& o) {
  ModelSpec m;
  if (preset) {
    m = model_preset(*preset);
  } else {
    const std::pair<const char*, bool> required[] = {{"--layers", o.layers.has_value()},
                                                     {"--d-model", o.d_model.has_value()},
                                                     {"--heads", o.heads.has_value()},
                                                     {"--seq-len", o.seq_len.has_value()}};
    for (const auto& [flag, given] : required)
      if (!given)
        throw InputError(fmt::format(
            "give a model: --preset NAME, or its shape (--layers, --d-model, --heads, --seq-len; "
            "{} is missing)",
            flag));
    m.name = "custom";
    m.arch = o.arch.value_or(Arch::gpt);
    m.vocab = 50257;
    m.tied_embeddings = m.arch == Arch::gpt;
  }
  const bool changed = o.layers || o.d_model || o.heads || o.kv_heads || o.ffn || o.vocab ||
                       o.arch || o.tied_embeddings || o.experts || o.top_k || o.shared_expert_ffn ||
                       o.head_width || o.dense_layers || o.dense_ffn || o.q_lora_rank ||
                       o.kv_lora_rank || o.rope_head_width || o.mtp_layers || o.router;
  // A preset without grouped-query attention keeps it when --heads changes; an MLP of 4h keeps
  // its ratio when --d-model changes.
  const bool full_attention = m.kv_heads == m.heads, mlp_4h = m.ffn == 4 * m.d_model;
  if (o.arch) m.arch = *o.arch;
  if (o.layers) m.layers = *o.layers;
  if (o.d_model) m.d_model = *o.d_model;
  if (o.heads) m.heads = *o.heads;
  if (o.seq_len) m.seq_len = *o.seq_len;
  if (o.vocab) m.vocab = *o.vocab;
  m.kv_heads = o.kv_heads.value_or(preset && !full_attention ? m.kv_heads : m.heads);
  m.ffn = o.ffn.value_or(preset && !mlp_4h ? m.ffn : 4 * m.d_model);
  if (o.tied_embeddings) m.tied_embeddings = *o.tied_embeddings;
  if (o.experts) m.experts = *o.experts;
  if (o.experts && *o.experts == 0)  // a dense model again
  {
    m.top_k = m.shared_expert_ffn = m.dense_layers = m.dense_ffn = 0;
    m.router = Router::softmax;
  }
  if (o.dense_layers) m.dense_layers = *o.dense_layers;
  if (o.dense_layers && *o.dense_layers == 0) m.dense_ffn = 0;  // every layer routed again
  if (o.dense_ffn) m.dense_ffn = *o.dense_ffn;
  if (o.kv_lora_rank && *o.kv_lora_rank == 0)  // no latent attention again
    m.q_lora_rank = m.rope_head_width = 0;
  if (o.q_lora_rank) m.q_lora_rank = *o.q_lora_rank;
  if (o.kv_lora_rank) m.kv_lora_rank = *o.kv_lora_rank;
  if (o.rope_head_width) m.rope_head_width = *o.rope_head_width;
  if (o.mtp_layers) m.mtp_layers = *o.mtp_layers;
  if (m.mla() && !o.kv_heads) m.kv_heads = m.heads;  // MLA: a key and a value per head
  if (o.top_k) m.top_k = *o.top_k;
  if (o.router) {
    if (m.experts == 0)
      throw InputError("--router needs routed experts (--experts E): a dense model routes nothing");
    m.router = *o.router;
  }
  if (o.shared_expert_ffn) m.shared_expert_ffn = *o.shared_expert_ffn;
  if (m.experts > 0 && m.top_k == 0)
    throw InputError(fmt::format(
        "--experts {} needs --top-k k: the experts each token is routed to (Mixtral 2, Qwen3 8)",
        m.experts));
  if (o.head_width) m.head_width = *o.head_width;
  if (preset && changed) m.name += " (modified)";
  check_model(m);
  return m;
}

void check_model(const ModelSpec& model) {
  const auto positive = [&](std::int64_t value, std::string_view what) {
    if (value < 1)
      throw InputError(
          fmt::format("model '{}': {} must be at least 1 (got {})", model.name, what, value));
  };
  positive(model.layers, "layers");
  positive(model.d_model, "d_model");
  positive(model.heads, "heads");
  positive(model.kv_heads, "kv_heads");
  positive(model.ffn, "ffn");
  positive(model.vocab, "vocab");
  positive(model.seq_len, "seq_len");
  if (model.head_width < 0)
    throw InputError(fmt::format("model '{}': the heads' width cannot be negative (got {})",
                                 model.name, model.head_width));
  if (model.head_width == 0 && model.d_model % model.heads != 0)
    throw InputError(fmt::format("model '{}': d_model {} is not divisible by {} heads", model.name,
                                 model.d_model, model.heads));
  if (model.heads % model.kv_heads != 0)
    throw InputError(fmt::format("model '{}': {} heads are not divisible by {} kv_heads",
                                 model.name, model.heads, model.kv_heads));
  if (model.experts < 0 || model.shared_expert_ffn < 0)
    throw InputError(
        fmt::format("model '{}': experts and the shared expert's width cannot be "
                    "negative (got {} and {})",
                    model.name, model.experts, model.shared_expert_ffn));
  if (model.experts == 0 && (model.top_k != 0 || model.shared_expert_ffn != 0))
    throw InputError(
        fmt::format("model '{}': --top-k and --shared-expert-ffn need routed experts (--experts E)",
                    model.name));
  if (model.experts > 0 && (model.top_k < 1 || model.top_k > model.experts))
    throw InputError(fmt::format(
        "model '{}': --top-k {} must be between 1 and the {} experts (each token goes to k of "
        "them)",
        model.name, model.top_k, model.experts));
  // Megatron-LM scores a group by its best top_k / group_topk experts: at least one each.
  if (model.router == Router::deepseek_v3 &&
      (model.experts % kDeepSeekRouterGroups != 0 || model.top_k < kDeepSeekRouterGroupTopk ||
       model.top_k > kDeepSeekRouterGroupTopk * (model.experts / kDeepSeekRouterGroups)))
    throw InputError(fmt::format(
        "model '{}': DeepSeek-V3's router puts the {} experts in {} groups and keeps {} of them "
        "for each token's top {}: --experts must be a multiple of {} and --top-k between {} and "
        "{}/{} of them, or --router softmax",
        model.name, model.experts, kDeepSeekRouterGroups, kDeepSeekRouterGroupTopk, model.top_k,
        kDeepSeekRouterGroups, kDeepSeekRouterGroupTopk, kDeepSeekRouterGroupTopk,
        kDeepSeekRouterGroups));
  if (model.dense_layers < 0 || model.dense_ffn < 0)
    throw InputError(
        fmt::format("model '{}': --dense-layers and --dense-ffn cannot be negative (got {} and {})",
                    model.name, model.dense_layers, model.dense_ffn));
  if (model.dense_layers > 0 && model.experts == 0)
    throw InputError(fmt::format(
        "model '{}': --dense-layers {} needs routed experts in the other layers (--experts E); a "
        "dense model is every layer dense",
        model.name, model.dense_layers));
  if (model.dense_layers > 0 && model.dense_ffn < 1)
    throw InputError(
        fmt::format("model '{}': --dense-layers {} needs the dense layers' MLP width, --dense-ffn "
                    "(DeepSeek-V3: "
                    "18432)",
                    model.name, model.dense_layers));
  if (model.dense_layers >= model.layers)
    throw InputError(fmt::format(
        "model '{}': --dense-layers {} leaves none of the {} layers routed; --dense-layers {} or "
        "fewer would work",
        model.name, model.dense_layers, model.layers, model.layers - 1));
  if (model.dense_layers == 0 && model.dense_ffn != 0)
    throw InputError(fmt::format("model '{}': --dense-ffn {} needs --dense-layers N", model.name,
                                 model.dense_ffn));
  if (model.mtp_layers < 0)
    throw InputError(fmt::format("model '{}': --mtp-layers cannot be negative (got {})", model.name,
                                 model.mtp_layers));
  if (model.q_lora_rank < 0 || model.kv_lora_rank < 0 || model.rope_head_width < 0)
    throw InputError(fmt::format(
        "model '{}': --q-lora-rank, --kv-lora-rank and --rope-head-dim cannot be negative",
        model.name));
  if (!model.mla() && (model.q_lora_rank > 0 || model.rope_head_width > 0))
    throw InputError(fmt::format(
        "model '{}': --q-lora-rank and --rope-head-dim are multi-head latent attention's: give "
        "--kv-lora-rank too (DeepSeek-V3: 512)",
        model.name));
  if (model.mla() && model.arch != Arch::llama)
    throw InputError(fmt::format(
        "model '{}': multi-head latent attention is built as DeepSeek's, with RMSNorm and rotary "
        "positions: --arch llama",
        model.name));
  if (model.mla() && model.kv_heads != model.heads)
    throw InputError(fmt::format(
        "model '{}': multi-head latent attention has a key and a value per head: --kv-heads {} "
        "must be the {} heads",
        model.name, model.kv_heads, model.heads));
  // The largest counts: every parameter, and one layer's activations for one sequence on one GPU
  // (a larger micro-batch is checked when it is asked for).
  counts_of(model);
  activation_bytes_of(model, ActivationOptions{});
}

ModelSpec ModelSpec::dense_part() const {
  ModelSpec m = *this;
  m.experts = m.top_k = m.shared_expert_ffn = 0;
  m.router = Router::softmax;
  m.ffn = dense_ffn;
  m.dense_layers = m.dense_ffn = 0;
  return m;
}

ParamCounts parameter_counts(const ModelSpec& model) {
  check_model(model);
  return counts_of(model);
}

std::int64_t layer_activation_bytes(const ModelSpec& model, const ActivationOptions& options) {
  check_model(model);
  if (options.microbatch_size < 1)
    throw InputError(
        fmt::format("the micro-batch size must be at least 1 (got {})", options.microbatch_size));
  if (options.tensor_parallel < 1)
    throw InputError(fmt::format("the tensor-parallel size must be at least 1 (got {})",
                                 options.tensor_parallel));
  return activation_bytes_of(model, options);
}

}  // namespace paci::plan
