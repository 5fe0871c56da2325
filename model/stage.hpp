// A pipeline stage of the GPT-2 model: forward and backward over its blocks (plus the embeddings
// on the first stage, the final LayerNorm, untied head and loss on the last). The whole model is
// the one stage {0, L}: the same code, so chained stages give bitwise the one-stage results.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "model/activations.hpp"
#include "model/blas.hpp"
#include "model/image.hpp"
#include "model/layout.hpp"
#include "model/ops.hpp"

namespace paci::model {

// What a stage's forward consumes: token ids (B,T) on the first stage, the previous stage's
// output activations (B,T,C) on every other.
class StageInput {
 public:
  static StageInput tokens(std::span<const std::int32_t> ids) { return StageInput(ids, {}); }
  static StageInput activations(std::span<const float> x) { return StageInput({}, x); }
  bool is_tokens() const { return is_tokens_; }
  std::span<const std::int32_t> token_ids() const { return tokens_; }
  std::span<const float> values() const { return activations_; }

 private:
  StageInput(std::span<const std::int32_t> t, std::span<const float> a)
      : tokens_(t), activations_(a), is_tokens_(a.empty() && !t.empty()) {}
  std::span<const std::int32_t> tokens_;
  std::span<const float> activations_;
  bool is_tokens_ = false;
};

// A split backward (Zero Bubble's I, then W later): every output gradient the weight gradients
// need, kept by Stage::backward_input for Stage::backward_weight. Sized for one stage by
// Stage::make_weight_stash() (allocates; do it before training).
class WeightGradStash {
 public:
  WeightGradStash() = default;
  bool filled() const { return filled_; }
  std::size_t bytes() const { return data_.size() * sizeof(float); }
  // Its whole state, for a cut (model/image.hpp).
  void save_image(ImageWriter& out) const {
    out.put(std::span<const float>(data_));
    out.put(static_cast<std::uint8_t>(filled_));
  }
  void load_image(ImageReader& in) {
    in.get(std::span<float>(data_));
    filled_ = in.get<std::uint8_t>() != 0;
  }

 private:
  friend class Stage;
  explicit WeightGradStash(std::size_t floats) : data_(floats, 0.0f) {}
  // The head's loss and final-LayerNorm output gradients (last stage: R·V + R·C); per block, the
  // output gradients of fcproj (R·C), fc (R·4C) (a mixture-of-experts block: the router's (R·E),
  // the experts' w2 (N·C), w1 and w3 (N·H each), the shared expert's w2 (R·C), w1 and w3 (R·H
  // each)), then ln2 (R·C), attproj (R·C), qkv (R·3C) and ln1 (R·C); the encoder's (first stage:
  // R·C).
  std::vector<float> data_;
  bool filled_ = false;
};

// Expert parallelism's one collective. The processes of a stage's expert group (StageShape::
// experts: part i of n) hold the same tokens and compute the same routing, and each runs only its
// own experts' rows, which are contiguous in the expert order: share() gives every member every
// member's rows (an all-gather, Megatron-LM's "allgather" token dispatcher). `rows` holds rows of
// `width` floats; `first` has n + 1 entries: member m filled rows [first[m], first[m + 1]), in
// every member the same (an exchange may check that they agree: the routing's bounds).
class ExpertExchange {
 public:
  virtual ~ExpertExchange() = default;
  virtual void share(std::span<float> rows, std::span<const std::size_t> first,
                     std::size_t width) = 0;
};

// One stage's compute. Parameters and gradients are passed in (ParamLayout buffers), so a caller
// chooses which weight version each call reads. Owns only scratch: calls must not overlap.
// Every buffer is allocated in the constructor; forward and backward allocate nothing.
class Stage {
 public:
  // threads: OpenMP threads for this stage's loops and GEMM chunks. Sets OpenBLAS (process-wide)
  // to one thread if it is not already (model/blas.hpp says why).
  explicit Stage(const StageShape& shape, std::size_t threads = 1);

  const StageShape& shape() const { return shape_; }
  const ParamLayout& layout() const { return layout_; }
  bool is_first() const { return shape_.range.is_first(); }
  bool is_last() const { return shape_.range.is_last(shape_.config); }

  std::size_t threads() const { return threads_; }
  void set_threads(std::size_t threads);
  // A stage holding part of its experts (shape().experts) shares their rows through `exchange`
  // (not owned; set before the first forward, ModelError otherwise).
  void set_expert_exchange(ExpertExchange* exchange) { exchange_ = exchange; }

  // A slot sized for this stage (allocates; do it before training).
  ActivationSlot make_slot() const { return ActivationSlot(shape_); }

  // Forward of a non-last stage. Fills slot and returns the output (B,T,C), a view into the slot
  // valid until the slot is reused. Token ids must be in [0, V).
  // loss_scale: what the backward scales the mixture-of-experts load-balancing losses by (the
  // same 1/M the last stage's loss has); a dense model ignores it.
  std::span<const float> forward(std::span<const float> params, const StageInput& input,
                                 ActivationSlot& slot, float loss_scale = 1.0f);
  // Forward of the last stage through the loss. targets (B,T) in [0, V). The backward will
  // produce the gradient of loss_scale · mean loss (1/M to average over M accumulated
  // micro-batches). Returns the unscaled mean cross-entropy over the B·T positions.
  float forward_loss(std::span<const float> params, const StageInput& input,
                     std::span<const std::int32_t> targets, float loss_scale, ActivationSlot& slot);

  // Backward of the micro-batch whose forward filled slot, reading params (the current weights
  // for PACI, the stashed ones for PipeDream: the caller chooses). grads += this micro-batch's
  // parameter gradients. d_output: dL/d(output) (B,T,C) on a non-last stage, empty on the last.
  // d_input: receives dL/d(input) (B,T,C) on a non-first stage, empty on the first.
  void backward(std::span<const float> params, std::span<float> grads, const ActivationSlot& slot,
                std::span<const float> d_output, std::span<float> d_input);

  // The same backward split in two (Zero Bubble's I and W), with the same arithmetic, so that
  // backward_input then backward_weight adds to grads exactly what backward does.
  // backward_input: d_input as backward gives it (reading params), and into `stash` what the
  // weight gradients need. backward_weight: grads += the weight gradients, from the slot and the
  // stash (reads no weights). The slot must stay filled until backward_weight.
  WeightGradStash make_weight_stash() const;
  void backward_input(std::span<const float> params, const ActivationSlot& slot,
                      std::span<const float> d_output, std::span<float> d_input,
                      WeightGradStash& stash);
  void backward_weight(std::span<float> grads, const ActivationSlot& slot, WeightGradStash& stash);

  // Logits (B,T,V) of the last forward_loss on this stage.
  std::span<const float> logits() const;

  // GEMM time and FLOPs of this stage's calls since the last reset (enable_gemm_timing(true)).
  void enable_gemm_timing(bool on) { time_gemms_ = on; }
  const GemmStats& gemm_stats() const { return gemm_stats_; }
  void reset_gemm_stats() { gemm_stats_ = {}; }

 private:
  void check_params(std::span<const float> params) const;
  void check_slot(const ActivationSlot& slot) const;
  const float* run_forward(const float* p, const StageInput& input, ActivationSlot& slot);
  void block_forward(const float* p, const BlockOffsets& w, const float* x, ActivationSlot& slot,
                     const BlockActivations& a);
  // g null: the input half alone, keeping the output gradients the weights need in `keep`.
  void block_backward(const float* p, float* g, const BlockOffsets& w, const float* x,
                      const ActivationSlot& slot, const BlockActivations& a, const float* dy,
                      float* dx, float* keep = nullptr);
  void block_backward_weight(float* g, const BlockOffsets& w, const float* x,
                             const ActivationSlot& slot, const BlockActivations& a,
                             const float* kept);
  // The mixture-of-experts MLP (stage_moe.cpp): out = res2 + shared(ln2) + Σ_k gate·expert(ln2).
  void moe_forward(const float* p, const BlockOffsets& w, ActivationSlot& slot,
                   const BlockActivations& a);
  // Writes ln2's gradient into dln_; keeps (split) what the weights need in the stash.
  void moe_backward(const float* p, float* g, const BlockOffsets& w, const ActivationSlot& slot,
                    const BlockActivations& a, const float* dy, float* keep);
  void moe_backward_weight(float* g, const BlockOffsets& w, const ActivationSlot& slot,
                           const BlockActivations& a, const float* kept);
  std::size_t moe_stash_floats() const;
  // Expert parallelism: every member's rows of `rows` (C floats each) from the member that computed
  // them; nothing when the stage holds every expert.
  void share_expert_rows(float* rows, const std::int32_t* first_row);
  // Both halves (split: g null, stash given; then backward_weight).
  void run_backward(std::span<const float> params, float* g, const ActivationSlot& slot,
                    std::span<const float> d_output, std::span<float> d_input,
                    WeightGradStash* stash);
  std::size_t block_stash_floats() const;
  std::size_t head_stash_floats() const;

  // Built per call, so that a moved Stage never points at another one's statistics.
  OpContext ctx() { return {threads_, time_gemms_ ? &gemm_stats_ : nullptr}; }

  StageShape shape_;
  ParamLayout layout_;
  std::size_t threads_ = 1;
  bool time_gemms_ = false;
  GemmStats gemm_stats_;
  // Scratch, one micro-batch at a time (shapes with R = B·T).
  std::vector<float> logits_;           // (R,V) last stage
  std::vector<float> dlogits_;          // (R,V) last stage
  std::vector<float> dres_a_, dres_b_;  // (R,C) residual-stream gradients, ping-pong
  std::vector<float> dres2_;            // (R,C) gradient at a block's mid residual
  std::vector<float> dln_;              // (R,C) gradient at a LayerNorm output
  std::vector<float> datty_;            // (R,C)
  std::vector<float> dqkv_;             // (R,3C)
  std::vector<float> dfch_;             // (R,4C)
  std::vector<float> datt_;             // (B,NH,T,T)
  // Mixture-of-experts blocks (N = R·K):
  std::vector<float> router_;                // (R,E) logits, then their gradient
  std::vector<float> dgates_;                // (R,K)
  std::vector<float> dxe_;                   // (N,C)
  std::vector<float> dh_;                    // (N,H)
  std::vector<float> moe_kept_;              // a fused backward's moe_stash_floats()
  std::vector<std::int32_t> route_scratch_;  // (E)
  ExpertExchange* exchange_ = nullptr;       // expert parallelism's group
  std::vector<std::size_t> share_first_;     // (n + 1)
};

}  // namespace paci::model
