// The transformer a plan trains: GPT-style (LayerNorm, GeLU MLP, learned positions, biases, tied
// embeddings) or Llama-style (RMSNorm, SwiGLU, grouped-query attention, rotary, no biases, untied
// head), by preset or by shape; and the closed forms the cluster model is built from: parameter
// counts and activation bytes per layer (docs/costmodel.md writes every formula out; the tests
// check them against the real models' counts and Megatron's published activation formula).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace paci::plan {

enum class Arch { gpt, llama };
std::string_view to_string(Arch arch);
Arch parse_arch(std::string_view text);  // "gpt" | "llama"; InputError otherwise

// How a mixture of experts routes its tokens. The routers' costs are the same (an h x E GEMM and
// a top-k); which one a launch builds is not, so the plan carries it to the tools.
//   softmax:     softmax scores, the top k experts, an auxiliary load-balancing loss (Mixtral's,
//                Qwen3's; Megatron-LM's default).
//   deepseek_v3: DeepSeek-V3's (its config.json: scoring_func sigmoid, n_group 8, topk_group 4,
//                routed_scaling_factor 2.5; its paper, section 2.1.2 and 4.2: an expert bias
//                updated at 0.001 to balance the experts without an auxiliary loss, and a
//                sequence-wise balance loss of weight 0.0001): sigmoid scores, the experts in 8
//                groups of which each token keeps the 4 with the best scores, the top k among them.
enum class Router { softmax, deepseek_v3 };
inline constexpr std::int64_t kDeepSeekRouterGroups = 8;
inline constexpr std::int64_t kDeepSeekRouterGroupTopk = 4;
std::string_view to_string(Router router);
Router parse_router(std::string_view text);  // "softmax" | "deepseek-v3"; InputError otherwise

// Letters as in docs/costmodel.md: L layers, h d_model, a heads, g kv_heads, f ffn, V vocab,
// s seq_len.
struct ModelSpec {
  std::string name = "custom";  // the preset's name, or "custom"
  Arch arch = Arch::gpt;
  std::int64_t layers = 0;    // L
  std::int64_t d_model = 0;   // h
  std::int64_t heads = 0;     // a
  std::int64_t kv_heads = 0;  // g (= a without grouped-query attention)
  std::int64_t ffn = 0;       // f: the MLP's hidden width (gpt: 4h; llama: the SwiGLU width); with
                              // experts, each expert's
  std::int64_t vocab = 0;     // V
  std::int64_t seq_len = 0;   // s: tokens per sequence (gpt: also its learned positions)
  bool tied_embeddings = true;  // the LM head reuses the token embedding
  // Mixture of experts (docs/costmodel.md, "Mixture of experts"): with E > 0 every layer's MLP is
  // E routed experts of width f (the arch's MLP each), a linear router (h x E) sending each token
  // to k of them, and, when shared_expert_ffn > 0, a shared MLP of that width every token passes.
  std::int64_t experts = 0;            // E (0: a dense model)
  std::int64_t top_k = 0;              // k
  std::int64_t shared_expert_ffn = 0;  // the shared experts' width together (0: none)
  Router router = Router::softmax;     // with experts
  bool moe() const { return experts > 0; }
  // With experts, the first dense_layers layers keep a dense MLP of width dense_ffn (DeepSeek-V3's
  // first three, 18432 wide); the rest are routed.
  std::int64_t dense_layers = 0;
  std::int64_t dense_ffn = 0;
  // Multi-head latent attention (DeepSeek-V2/V3's MLA, as Megatron-LM's MLASelfAttention runs it)
  // when kv_lora_rank > 0: the keys and values come up from a kv_lora_rank-wide latent, the
  // queries from a q_lora_rank-wide one (0: projected from h directly); each query and key head
  // is head_dim() wide plus rope_head_width rotary columns (the key's shared by every head), each
  // value head head_dim() wide. kv_heads = heads.
  std::int64_t q_lora_rank = 0;
  std::int64_t kv_lora_rank = 0;
  std::int64_t rope_head_width = 0;
  bool mla() const { return kv_lora_rank > 0; }
  // Multi-token prediction (DeepSeek-V3's, Megatron-LM's --mtp-num-layers): this many modules on
  // the last stage, each a layer like the model's last, a 2h -> h projection and three RMSNorms,
  // predicting one more token with the model's embedding and head.
  std::int64_t mtp_layers = 0;
  // The widths of a query (and key) head and of a value head.
  std::int64_t qk_head_dim() const { return head_dim() + rope_head_width; }
  // The model of one of the first dense layers (dense_layers > 0): the same attention, a dense MLP
  // of width dense_ffn.
  ModelSpec dense_part() const;

  // d: each head's width, h/a unless given (Qwen3's 128 with h = 2048 and 32 heads: queries 4096
  // wide, the attention output projected back to h).
  std::int64_t head_width = 0;
  std::int64_t head_dim() const { return head_width > 0 ? head_width : d_model / heads; }
  std::int64_t q_dim() const {
    return heads * head_dim();
  }  // width of Q (a·d, h unless d is given)
  std::int64_t kv_dim() const { return kv_heads * head_dim(); }  // width of K (and of V)
  friend bool operator==(const ModelSpec&, const ModelSpec&) = default;
};

// The presets: gpt2 (small, medium, large, xl), gpt3 (125m ... 175b), llama2 (7b, 13b, 70b),
// llama3 (8b, 70b, 405b), mixtral (8x7b, 8x22b), qwen3 (30b-a3b, 235b-a22b), deepseek-v3. Each
// with its published shape and default
// sequence length.
const std::vector<ModelSpec>& model_presets();
// The preset called `name`; InputError listing the known names otherwise.
ModelSpec model_preset(std::string_view name);
// A model from a preset and shape flags (each given one overriding the preset), or, without a
// preset, from the flags alone: layers, d_model, heads and seq_len required (InputError naming the
// missing flag), kv_heads = heads, ffn = 4·d_model, vocab 50257, tied embeddings for gpt and not
// for llama. A changed preset is named "<preset> (modified)". check_model() on the result.
struct ModelOverrides {
  std::optional<std::int64_t> layers, d_model, heads, kv_heads, ffn, vocab, seq_len;
  std::optional<std::int64_t> experts, top_k, shared_expert_ffn, head_width;
  std::optional<std::int64_t> dense_layers, dense_ffn, q_lora_rank, kv_lora_rank, rope_head_width;
  std::optional<std::int64_t> mtp_layers;
  std::optional<Arch> arch;
  std::optional<Router> router;
  std::optional<bool> tied_embeddings;
};
ModelSpec resolve_model(const std::optional<std::string>& preset, const ModelOverrides& flags);
// InputError naming the first problem: a count below 1, h not divisible by a, a not divisible by
// g, top-k outside 1..E (or given without experts), a size that would overflow the counts below.
void check_model(const ModelSpec& model);

struct ParamCounts {
  std::int64_t embedding = 0;  // V·h token embedding
  std::int64_t positions = 0;  // s·h learned positions (gpt), 0 (llama: rotary)
  std::int64_t per_layer = 0;  // one transformer layer (attention, MLP, its norms, biases); with
                               // dense first layers, one of the others (routed)
  std::int64_t dense_per_layer = 0;  // one of the first dense_layers layers, 0 if none
  // What every layer together computes with per token: the dense ones' and the others' active,
  // and the multi-token-prediction modules' (their layer and projection).
  std::int64_t active_layers = 0;
  std::int64_t mtp = 0;  // the multi-token-prediction modules' own (embedding and head shared)
  // Of them, what one token computes with: with experts its k routed experts (and the router,
  // the shared expert); per_layer for a dense model.
  std::int64_t active_per_layer = 0;
  std::int64_t expert_per_layer = 0;  // the routed experts' parameters (E of them), 0 if dense
  std::int64_t final_norm = 0;        // the norm before the head
  std::int64_t head = 0;              // V·h when untied, 0 when tied (it is the embedding)
  std::int64_t total = 0;  // embedding + positions + the layers + final_norm + head + mtp
};
ParamCounts parameter_counts(const ModelSpec& model);

// Activation bytes one layer keeps from its forward to its backward, per micro-batch of b
// sequences, on one GPU of a tensor-parallel group of t, in 16-bit activations with 1-byte
// dropout masks (gpt has dropout; llama has none), as Korthikanti et al. 2022 count them (Table 2:
// sbh(34 + 5as/h) without parallelism; sbh(10 + 24/t + 5as/(ht)) with t; sbh(34/t + 5as/(ht))
// with sequence parallelism; the 5as/h term gone with selective recomputation; 2sbh (the layer's
// input) with full recomputation), generalised to any ffn width, grouped-query attention, SwiGLU
// and no dropout (docs/costmodel.md). With sequence parallelism, full recomputation keeps the
// input's sequence shard, 2sbh/t. Per GPU, heads (K/V heads replicated when t > g), the MLP
// width and, with sequence parallelism, the sequence are split by t rounded up: the paper's
// values exactly when t divides them. `flash_attention`: the attention core keeps no s x s
// matrices, only its output and the fp32 softmax statistics (4 bytes per head and token), as
// FlashAttention does. InputError for a bad model (check_model), b < 1, t < 1 or an overflow.
enum class Recompute { none, selective, full };
std::string_view to_string(Recompute recompute);
Recompute parse_recompute(std::string_view text);  // "none" | "selective" | "full"

struct ActivationOptions {
  std::int64_t microbatch_size = 1;  // b
  std::int64_t tensor_parallel = 1;  // t
  bool sequence_parallel = false;
  Recompute recompute = Recompute::none;
  bool flash_attention = false;
  // FP8 GEMMs (Transformer Engine): the four linear layers' inputs are kept for the backward as
  // their 8-bit casts, 1 byte per element instead of 2.
  bool fp8_linear_inputs = false;
  // With experts: the token copies the busiest GPU's experts receive over the mean (k·T/t each
  // when the router balances them exactly).
  double expert_load = 1.0;
};
std::int64_t layer_activation_bytes(const ModelSpec& model, const ActivationOptions& options);

}  // namespace paci::plan
