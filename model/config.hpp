// GPT-2 shape (GptConfig), the block range a pipeline stage owns (StageRange), and the analytic
// FLOP count of a stage. Shape letters are declared here once and used in every comment of model/.
// validate() throws ModelError naming the bad field; every other part of model/ assumes it passed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace paci::model {

// Shape letters:
//   B   sequences per micro-batch          T   sequence length of a micro-batch (T ≤ max_seq_len)
//   C   channels (d_model)                 NH  attention heads;  HS = C / NH, the head size
//   V   vocabulary size                    L   transformer blocks (layers) of the whole model
//   R   rows = B·T                         OC  output channels of a matmul
//   E   experts of a mixture-of-experts block  K  experts each token is routed to (top-k)
//   H   hidden width of one expert's SwiGLU FFN   N  expert rows, at most R·K

// A mixture-of-experts MLP in every block (experts > 0; 0: GPT-2's dense MLP). A linear router
// (E, C) without bias; a softmax over the E logits; each token goes to its K most probable experts
// with gates the K probabilities renormalised to sum to 1 (Mixtral's and Qwen3's norm_topk_prob);
// each expert is a SwiGLU FFN w2·(silu(w1·x) ⊙ w3·x) without biases; an optional shared expert of
// the same width sees every token ungated (Qwen2-MoE's and DeepSeek's, without their gate).
// capacity_factor 0 is dropless; c > 0 lets each expert take ceil(c·R·K/E) assignments of a
// micro-batch, first choices of every token first, then second choices, each in token order
// (GShard's priority); an assignment over capacity contributes nothing. The load-balancing loss
// is Switch Transformer's as Megatron-LM computes it for top-k: aux_loss_coef · E · Σ_e f_e · P_e,
// f_e the share of the R·K assignments that chose e (before capacity), P_e the mean router
// probability of e over the R tokens; added to the training loss of each block's micro-batch.
struct MoeConfig {
  std::size_t experts = 0;  // E
  std::size_t top_k = 2;    // K
  std::size_t hidden = 0;   // H
  bool shared_expert = false;
  double capacity_factor = 0;   // 0: dropless
  double aux_loss_coef = 0.01;  // Switch Transformer's α

  bool enabled() const { return experts > 0; }
  // Assignments an expert takes from a micro-batch of `rows` tokens (rows·K when dropless).
  std::size_t capacity(std::size_t rows) const;
  friend bool operator==(const MoeConfig&, const MoeConfig&) = default;
};

struct GptConfig {
  std::size_t layers = 4;         // L
  std::size_t heads = 4;          // NH
  std::size_t d_model = 128;      // C
  std::size_t max_seq_len = 128;  // rows of the position embedding
  std::size_t vocab = 256;        // V (byte-level tokenizer by default)
  MoeConfig moe{};                // dense unless moe.experts > 0

  std::size_t head_dim() const { return d_model / heads; }  // HS
  // Throws ModelError unless every size is positive and heads divides d_model, and (MoE) top_k is
  // in [1, E], hidden is positive and the capacity factor and loss coefficient are finite, ≥ 0.
  void validate() const;

  friend bool operator==(const GptConfig&, const GptConfig&) = default;
};

// A stage owns blocks [first_layer, first_layer + num_layers). The stage with first_layer == 0
// also owns the token and position embeddings; the one ending at L also owns the final LayerNorm,
// the untied LM head and the loss. A single-device model is the one stage {0, L}.
struct StageRange {
  std::size_t first_layer = 0;
  std::size_t num_layers = 0;

  std::size_t end_layer() const { return first_layer + num_layers; }
  bool is_first() const { return first_layer == 0; }
  bool is_last(const GptConfig& config) const { return end_layer() == config.layers; }

  friend bool operator==(const StageRange&, const StageRange&) = default;
};

// Expert parallelism: the part of every block's experts one process's stage holds, part `index`
// of `count` equal parts (experts [index·E/count, (index+1)·E/count)). Every other tensor of the
// stage is whole in every part. count 1: all of them.
struct ExpertShard {
  std::size_t index = 0;
  std::size_t count = 1;

  bool whole() const { return count == 1; }
  std::size_t first(std::size_t experts) const { return index * (experts / count); }
  std::size_t end(std::size_t experts) const { return (index + 1) * (experts / count); }
  friend bool operator==(const ExpertShard&, const ExpertShard&) = default;
};

// Throws ModelError unless index < count and (count > 1) the model has experts, count of them
// per part.
void validate(const GptConfig& config, ExpertShard shard);

inline StageRange whole_model(const GptConfig& config) {
  return {0, config.layers};
}

// Throws ModelError if the range leaves the model, or owns neither a block nor an end of the model
// (an empty middle stage would compute nothing).
void validate(const GptConfig& config, StageRange range);

// Throws ModelError naming the first id outside [0, vocab) and its position; `what` names the ids
// ("token", "target").
void check_token_ids(std::span<const std::int32_t> ids, std::size_t vocab, const char* what);

// FLOPs of one micro-batch (B sequences of T tokens) through one stage, counting a multiply-add as
// two. Attention counts the full T×T score matrix (what the CPU path computes, as in PaLM's
// formula), not only its causal half. Backward is twice the forward (dX and dW).
struct StageFlops {
  double matmul_forward = 0;     // the linear layers and the LM head (MoE: the K chosen experts,
                                 // every assignment kept, the shared expert and the router)
  double attention_forward = 0;  // Q·Kᵀ and P·V
  double forward() const { return matmul_forward + attention_forward; }
  double backward() const { return 2 * forward(); }
  double forward_backward() const { return 3 * forward(); }
};
StageFlops stage_flops(const GptConfig& config, StageRange range, std::size_t batch,
                       std::size_t seq_len);

}  // namespace paci::model
