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
struct GptConfig {
  std::size_t layers = 4;         // L
  std::size_t heads = 4;          // NH
  std::size_t d_model = 128;      // C
  std::size_t max_seq_len = 128;  // rows of the position embedding
  std::size_t vocab = 256;        // V (byte-level tokenizer by default)

  std::size_t head_dim() const { return d_model / heads; }  // HS
  // Throws ModelError unless every size is positive and heads divides d_model.
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
  double matmul_forward = 0;     // the linear layers and the LM head
  double attention_forward = 0;  // Q·Kᵀ and P·V
  double forward() const { return matmul_forward + attention_forward; }
  double backward() const { return 2 * forward(); }
  double forward_backward() const { return 3 * forward(); }
};
StageFlops stage_flops(const GptConfig& config, StageRange range, std::size_t batch,
                       std::size_t seq_len);

}  // namespace paci::model
