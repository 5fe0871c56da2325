// A pipeline stage of the GPT-2 on the GPU: model::Stage's contract (forward, forward through the
// loss, backward with the parameters passed in, a slot per micro-batch) on device buffers, in fp32
// or bf16. Same StageShape and ParamLayout, so the executor swaps backends without forking models.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "cuda/activations.hpp"
#include "cuda/device.hpp"
#include "cuda/memory.hpp"
#include "cuda/precision.hpp"
#include "model/activations.hpp"
#include "model/layout.hpp"

namespace paci::cuda {

struct TokenGroups;  // cuda/ops.hpp

// What a stage's forward consumes: token ids (B,T) from the host on the first stage, the previous
// stage's output activations (B,T,C) on the device, in the stage's precision, on every other.
class StageInput {
 public:
  static StageInput tokens(std::span<const std::int32_t> ids) { return StageInput(ids, {}); }
  static StageInput activations(TensorView x) { return StageInput({}, x); }
  bool is_tokens() const { return is_tokens_; }
  std::span<const std::int32_t> token_ids() const { return tokens_; }
  TensorView values() const { return activations_; }

 private:
  StageInput(std::span<const std::int32_t> t, TensorView a)
      : tokens_(t), activations_(a), is_tokens_(a.empty() && !t.empty()) {}
  std::span<const std::int32_t> tokens_;
  TensorView activations_;
  bool is_tokens_ = false;
};

// A split backward (Zero Bubble's I, then W later): every output gradient the weight gradients
// need, kept on the device by Stage::backward_input for Stage::backward_weight, in the stage's
// precision. model::WeightGradStash's segments, each starting on a 256-byte boundary. Made by
// Stage::make_weight_stash() (allocates; do it before training).
class WeightGradStash {
 public:
  WeightGradStash() = default;
  bool filled() const { return filled_; }
  std::size_t bytes() const { return data_.bytes(); }

 private:
  friend class Stage;
  WeightGradStash(Precision precision, std::size_t count) : data_(precision, count) {}
  // The head's loss and final-LayerNorm output gradients (last stage: R·V + R·C); per block, from
  // the top, the output gradients of fcproj (R·C), fc (R·4C), ln2 (R·C), attproj (R·C), qkv
  // (R·3C) and ln1 (R·C); the encoder's (first stage: R·C).
  DeviceTensor data_;
  bool filled_ = false;
};

// One stage's compute on the current device. Owns a stream (every call is queued on it and
// returns before the GPU finishes, except forward_loss, which waits for its loss), cuBLAS handles
// and scratch; calls must not overlap. Everything is allocated in the constructor.
//   weights: layout().size() elements in the stage's precision (fp32: the master weights
//            themselves; bf16: the bf16 copy that cuda::AdamW::step writes).
//   grads:   layout().size() floats, accumulated (+=) by backward.
// A caller handing buffers between stages on different streams orders them with events.
class Stage {
 public:
  Stage(const model::StageShape& shape, Precision precision);

  const model::StageShape& shape() const { return shape_; }
  const model::ParamLayout& layout() const { return layout_; }
  Precision precision() const { return precision_; }
  bool is_first() const { return shape_.range.is_first(); }
  bool is_last() const { return shape_.range.is_last(shape_.config); }
  cudaStream_t stream() const { return resources_.stream(); }
  void synchronize() const { resources_.synchronize(); }
  // Route the linear layers' forward through cuBLASLt (default) or the plain GEMM path.
  void set_use_lt(bool on) { resources_.set_use_lt(on); }

  // A slot sized for this stage (allocates device memory; do it before training).
  ActivationSlot make_slot() const { return ActivationSlot(shape_, precision_); }

  // Forward of a non-last stage: fills slot, returns its output (B,T,C) on the device, valid until
  // the slot is reused. Token ids must be in [0, V).
  TensorView forward(TensorView weights, const StageInput& input, ActivationSlot& slot);
  // Forward of the last stage through the loss; targets (B,T) on the host, in [0, V). Returns the
  // unscaled mean cross-entropy (waits for it); backward produces the gradient of
  // loss_scale · mean loss.
  float forward_loss(TensorView weights, const StageInput& input,
                     std::span<const std::int32_t> targets, float loss_scale, ActivationSlot& slot);
  // forward_loss without waiting: the unscaled mean loss lands in *loss_host (pinned host memory)
  // once the stream gets there; the call returns as soon as the work is queued.
  void enqueue_forward_loss(TensorView weights, const StageInput& input,
                            std::span<const std::int32_t> targets, float loss_scale,
                            ActivationSlot& slot, double* loss_host);
  // Backward of the micro-batch whose forward filled slot, reading `weights` (the caller chooses
  // the version). grads += this micro-batch's gradients. d_output (B,T,C): dL/d(output) on a
  // non-last stage, empty on the last; d_input (B,T,C) receives dL/d(input) on a non-first stage,
  // empty on the first. Both in the stage's precision.
  void backward(TensorView weights, MutableTensorView grads, const ActivationSlot& slot,
                TensorView d_output, MutableTensorView d_input);

  // The same backward split in two, with the same kernels and sums (so the gradients equal
  // backward's bit for bit). backward_input: d_input as backward gives it (reading weights), and
  // into `stash` what the weight gradients need. backward_weight: grads += the weight gradients,
  // from the slot and the stash (reads no weights). The slot must stay filled until
  // backward_weight; both are queued on the stage's stream, which orders them.
  WeightGradStash make_weight_stash() const;
  void backward_input(TensorView weights, const ActivationSlot& slot, TensorView d_output,
                      MutableTensorView d_input, WeightGradStash& stash);
  void backward_weight(MutableTensorView grads, const ActivationSlot& slot, WeightGradStash& stash);

  // Logits (B,T,V) of the last forward_loss, in the stage's precision, each row logits_ld()
  // elements apart: V rounded up to a multiple of 128, as llm.c pads (50257 -> 50304), so that
  // every row is 16-byte aligned and the head's GEMMs take cuBLASLt's fast path. The padding
  // columns hold zeros and the loss never reads them.
  TensorView logits() const;
  std::size_t logits_ld() const { return logits_ld_; }

 private:
  void check_weights(TensorView weights) const;
  void check_slot(const ActivationSlot& slot) const;
  void stage_ids(const StageInput& input, std::span<const std::int32_t> targets,
                 ActivationSlot& slot);
  template <typename floatX>
  const floatX* run_forward(const floatX* p, const StageInput& input, ActivationSlot& slot);
  template <typename floatX>
  void run_loss(const floatX* p, const floatX* x, ActivationSlot& slot, double* loss_host);
  // The last block's output (the input where the stage has no block); the first stage's tokens
  // grouped for the encoder's backward.
  template <typename floatX>
  const floatX* top_output(const ActivationSlot& slot) const;
  TokenGroups token_groups(const ActivationSlot& slot) const;
  void check_backward(TensorView weights, const ActivationSlot& slot, TensorView d_output,
                      MutableTensorView d_input) const;
  void check_grads(MutableTensorView grads) const;
  // g null: the input half alone, keeping what the weights need in `keep` (a stash's start).
  template <typename floatX>
  void run_backward(const floatX* p, float* g, const ActivationSlot& slot, const floatX* d_output,
                    floatX* d_input, floatX* keep);
  template <typename floatX>
  void run_backward_weight(float* g, const ActivationSlot& slot, const floatX* kept);
  template <typename floatX>
  void block_forward(const floatX* p, const model::BlockOffsets& w, const floatX* x,
                     ActivationSlot& slot, const model::BlockActivations& a);
  template <typename floatX>
  void block_backward(const floatX* p, float* g, const model::BlockOffsets& w, const floatX* x,
                      const ActivationSlot& slot, const model::BlockActivations& a,
                      const floatX* dy, floatX* dx, floatX* keep);
  template <typename floatX>
  void block_backward_weight(float* g, const model::BlockOffsets& w, const floatX* x,
                             const ActivationSlot& slot, const model::BlockActivations& a,
                             const floatX* kept);
  // Stash segments start on 256-byte boundaries, as the scratch the fused backward reads from
  // does (cudaMalloc's alignment), so cuBLAS picks the same kernels for I's and W's GEMMs.
  std::size_t padded(std::size_t elements) const;
  std::size_t block_stash_count() const;
  std::size_t head_stash_count() const;
  std::size_t stash_count() const;

  model::StageShape shape_;
  model::ParamLayout layout_;
  Precision precision_;
  Resources resources_;
  // Scratch, one micro-batch at a time (R = B·T), in the stage's precision unless noted.
  std::size_t logits_ld_ = 0;              // the padded vocabulary, Vp
  DeviceTensor logits_, dlogits_;          // (R,Vp) last stage
  DeviceTensor dres_a_, dres_b_;           // (R,C) residual-stream gradients, ping-pong
  DeviceTensor dres2_, dln_, datty_;       // (R,C)
  DeviceTensor dqkv_, dfch_;               // (R,3C), (R,4C)
  DeviceTensor dsoft_;                     // (B,NH,T,T) softmax input gradient
  DeviceBuffer<float> scores_;             // (B,NH,T,T) float: Q·Kᵀ, then dL/d(att)
  DeviceBuffer<double> loss_mean_;         // (1)
  PinnedBuffer<double> loss_host_;         // (1)
  std::vector<std::uint64_t> group_keys_;  // (R) host scratch of the token grouping
};

}  // namespace paci::cuda
