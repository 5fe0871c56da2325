// GPU stage forward/backward, model/stage.cpp line for line on device pointers: the encoder, the
// pre-LN blocks x + attn(ln1(x)), then + mlp(ln2(.)), and the head with the fused loss. The public
// calls check shapes on the host, then run the floatX (float or bf16) body on the stage's stream.
#include "cuda/stage.hpp"

#include <algorithm>
#include <utility>

#include "cuda/ops.hpp"
#include "model/check.hpp"
#include "model/checkpoint_llmc.hpp"

namespace paci::cuda {
namespace {

template <typename floatX>
void copy_device(cudaStream_t stream, floatX* dst, const floatX* src, std::size_t n) {
  PACI_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(floatX), cudaMemcpyDeviceToDevice, stream));
}

std::size_t widest_columns(const model::StageShape& shape) {
  return 4 * shape.config.d_model;  // the fc bias; LayerNorms and other biases are narrower
}

}  // namespace

Stage::Stage(const model::StageShape& shape, Precision precision)
    : shape_(shape),
      layout_(shape.config, shape.range),
      precision_(precision),
      resources_(partial_floats(shape.rows(), widest_columns(shape))),
      loss_mean_(1),
      loss_host_(1),
      group_keys_(shape.rows()) {
  shape_.validate();
  PACI_MODEL_CHECK(!shape.config.moe.enabled(),
                   "the CUDA backend's GPT is dense: a mixture of experts runs on the CPU");
  const std::size_t R = shape.rows(), C = shape.config.d_model;
  if (is_last()) {
    logits_ld_ = model::llmc_padded_vocab(shape.config.vocab);
    logits_ = DeviceTensor(precision, R * logits_ld_);
    dlogits_ = DeviceTensor(precision, R * logits_ld_);
    // The padding columns are never written by the head's GEMM: zero them once, so that every
    // byte of the logits is defined (copies, downloads and compute-sanitizer's initcheck).
    PACI_CUDA_CHECK(cudaMemsetAsync(logits_.view().data, 0, logits_.bytes(), stream()));
    PACI_CUDA_CHECK(cudaMemsetAsync(dlogits_.view().data, 0, dlogits_.bytes(), stream()));
  }
  dres_a_ = DeviceTensor(precision, R * C);
  dres_b_ = DeviceTensor(precision, R * C);
  if (shape.range.num_layers > 0 || is_last()) dln_ = DeviceTensor(precision, R * C);
  if (shape.range.num_layers > 0) {
    dres2_ = DeviceTensor(precision, R * C);
    datty_ = DeviceTensor(precision, R * C);
    dqkv_ = DeviceTensor(precision, 3 * R * C);
    dfch_ = DeviceTensor(precision, 4 * R * C);
    const std::size_t att = shape.batch * shape.config.heads * shape.seq_len * shape.seq_len;
    dsoft_ = DeviceTensor(precision, att);
    scores_ = DeviceBuffer<float>(att);
  }
}

void Stage::check_weights(TensorView weights) const {
  PACI_MODEL_CHECK(weights.count == layout_.size() && weights.precision == precision_,
                   "weights hold {} {} elements, the stage needs {} in {}", weights.count,
                   to_string(weights.precision), layout_.size(), to_string(precision_));
}

void Stage::check_slot(const ActivationSlot& slot) const {
  PACI_MODEL_CHECK(slot.shape() == shape_ && slot.precision() == precision_,
                   "activation slot was made for another stage shape or precision");
}

TensorView Stage::logits() const {
  PACI_MODEL_CHECK(is_last(), "only the last stage computes logits");
  return logits_.view();
}

// Copies the first stage's tokens (with their grouping for the encoder backward) and the last
// stage's targets into the slot, through the slot's pinned staging once its previous copy left.
void Stage::stage_ids(const StageInput& input, std::span<const std::int32_t> targets,
                      ActivationSlot& slot) {
  const std::size_t R = shape_.rows();
  slot.ids_copied_.synchronize();  // the slot's previous staging copy has left its buffer
  std::int32_t* host = slot.ids_host_.data();
  if (is_first()) {
    std::copy(input.token_ids().begin(), input.token_ids().end(), host);
    slot.group_count_ = group_tokens({host, R}, group_keys_, {host + R, R}, {host + 2 * R, R + 1},
                                     {host + 3 * R + 1, R});
    PACI_CUDA_CHECK(cudaMemcpyAsync(slot.ids_.data() + slot.tokens_, host,
                                    (4 * R + 1) * sizeof(std::int32_t), cudaMemcpyHostToDevice,
                                    stream()));
  }
  if (!targets.empty()) {
    std::copy(targets.begin(), targets.end(), host + 4 * R + 1);
    PACI_CUDA_CHECK(cudaMemcpyAsync(slot.ids_.data() + slot.targets_, host + 4 * R + 1,
                                    R * sizeof(std::int32_t), cudaMemcpyHostToDevice, stream()));
  }
  slot.ids_copied_.record(stream());
}

template <typename floatX>
const floatX* Stage::run_forward(const floatX* p, const StageInput& input, ActivationSlot& slot) {
  const std::size_t B = shape_.batch, T = shape_.seq_len, C = shape_.config.d_model;
  const OpContext ctx = resources_.context();
  floatX* x = slot.value<floatX>(slot.input_);  // (R,C)
  if (is_first()) {
    encoder_forward(ctx, x, slot.ids_.data() + slot.tokens_, p + layout_.wte(), p + layout_.wpe(),
                    B, T, C);  // (E1)
  } else {
    copy_device(stream(), x, input.values().as<floatX>(), B * T * C);
  }
  for (std::size_t l = 0; l < shape_.range.num_layers; ++l) {
    const model::BlockActivations& a = slot.blocks_[l];
    block_forward(p, layout_.block(l), x, slot, a);
    x = slot.value<floatX>(a.out);
  }
  slot.filled_ = true;
  return x;
}

TensorView Stage::forward(TensorView weights, const StageInput& input, ActivationSlot& slot) {
  PACI_MODEL_CHECK(!is_last(), "the last stage's forward needs targets: call forward_loss");
  check_weights(weights);
  check_slot(slot);
  const std::size_t R = shape_.rows(), C = shape_.config.d_model;
  if (is_first()) {
    PACI_MODEL_CHECK(input.is_tokens() && input.token_ids().size() == R,
                     "first stage needs {} token ids (B={}, T={})", R, shape_.batch,
                     shape_.seq_len);
    model::check_token_ids(input.token_ids(), shape_.config.vocab, "token");
    stage_ids(input, {}, slot);
  } else {
    PACI_MODEL_CHECK(!input.is_tokens() && input.values().count == R * C &&
                         input.values().precision == precision_,
                     "stage needs {} input activations in {} (B={}, T={}, C={}), got {}", R * C,
                     to_string(precision_), shape_.batch, shape_.seq_len, C, input.values().count);
  }
  slot.filled_ = false;
  if (precision_ == Precision::fp32) {
    run_forward(weights.as<float>(), input, slot);
  } else {
    run_forward(weights.as<bf16>(), input, slot);
  }
  return slot.output();
}

float Stage::forward_loss(TensorView weights, const StageInput& input,
                          std::span<const std::int32_t> targets, float loss_scale,
                          ActivationSlot& slot) {
  enqueue_forward_loss(weights, input, targets, loss_scale, slot, loss_host_.data());
  synchronize();
  return static_cast<float>(loss_host_[0]);
}

void Stage::enqueue_forward_loss(TensorView weights, const StageInput& input,
                                 std::span<const std::int32_t> targets, float loss_scale,
                                 ActivationSlot& slot, double* loss_host) {
  PACI_MODEL_CHECK(is_last(), "only the last stage computes the loss: call forward");
  check_weights(weights);
  check_slot(slot);
  const std::size_t R = shape_.rows(), C = shape_.config.d_model;
  PACI_MODEL_CHECK(targets.size() == R, "loss needs {} targets, got {}", R, targets.size());
  model::check_token_ids(targets, shape_.config.vocab, "target");
  if (is_first()) {
    PACI_MODEL_CHECK(input.is_tokens() && input.token_ids().size() == R,
                     "first stage needs {} token ids (B={}, T={})", R, shape_.batch,
                     shape_.seq_len);
    model::check_token_ids(input.token_ids(), shape_.config.vocab, "token");
  } else {
    PACI_MODEL_CHECK(!input.is_tokens() && input.values().count == R * C &&
                         input.values().precision == precision_,
                     "stage needs {} input activations in {}, got {}", R * C, to_string(precision_),
                     input.values().count);
  }
  slot.filled_ = false;
  stage_ids(input, targets, slot);
  slot.loss_scale_ = loss_scale;
  if (precision_ == Precision::fp32) {
    const float* p = weights.as<float>();
    run_loss(p, run_forward(p, input, slot), slot, loss_host);
  } else {
    const bf16* p = weights.as<bf16>();
    run_loss(p, run_forward(p, input, slot), slot, loss_host);
  }
}

template <typename floatX>
void Stage::run_loss(const floatX* p, const floatX* x, ActivationSlot& slot, double* loss_host) {
  const std::size_t R = shape_.rows(), C = shape_.config.d_model, V = shape_.config.vocab;
  const OpContext ctx = resources_.context();
  floatX* lnf = slot.value<floatX>(slot.lnf_);
  floatX* logits = logits_.as<floatX>();
  layernorm_forward(ctx, lnf, slot.stat(slot.lnf_mean_), slot.stat(slot.lnf_rstd_), x,
                    p + layout_.ln_f_w(), p + layout_.ln_f_b(), R, C);  // (H1)
  const std::size_t Vp = logits_ld_;
  matmul_forward(ctx, logits, lnf, p + layout_.lm_head(), static_cast<const floatX*>(nullptr),
                 static_cast<const floatX*>(nullptr), R, C, V, Vp);  // (H2) untied head, no bias
  crossentropy_forward(ctx, slot.stat(slot.probs_), slot.stat(slot.losses_), logits,
                       slot.ids_.data() + slot.targets_, R, V, Vp);  // (H3) padding masked
  mean_of(ctx, loss_mean_.data(), slot.stat(slot.losses_), R);
  PACI_CUDA_CHECK(cudaMemcpyAsync(loss_host, loss_mean_.data(), sizeof(double),
                                  cudaMemcpyDeviceToHost, stream()));
}

template <typename floatX>
void Stage::block_forward(const floatX* p, const model::BlockOffsets& w, const floatX* x,
                          ActivationSlot& slot, const model::BlockActivations& a) {
  const std::size_t B = shape_.batch, T = shape_.seq_len, R = shape_.rows();
  const std::size_t C = shape_.config.d_model, NH = shape_.config.heads;
  const OpContext ctx = resources_.context();
  floatX* ln1 = slot.value<floatX>(a.ln1);
  floatX* qkv = slot.value<floatX>(a.qkv);
  floatX* atty = slot.value<floatX>(a.atty);
  floatX* res2 = slot.value<floatX>(a.residual2);
  floatX* ln2 = slot.value<floatX>(a.ln2);
  floatX* fch = slot.value<floatX>(a.fch);
  floatX* fch_gelu = slot.value<floatX>(a.fch_gelu);
  const floatX* none = nullptr;
  layernorm_forward(ctx, ln1, slot.stat(a.ln1_mean), slot.stat(a.ln1_rstd), x, p + w.ln1_w,
                    p + w.ln1_b, R, C);                                        // (B1)
  matmul_forward(ctx, qkv, ln1, p + w.qkv_w, p + w.qkv_b, none, R, C, 3 * C);  // (B2)
  attention_forward(ctx, atty, slot.value<floatX>(a.att), scores_.data(), qkv, B, T, C,
                    NH);                                                          // (B3)
  matmul_forward(ctx, res2, atty, p + w.attproj_w, p + w.attproj_b, x, R, C, C);  // (B4)
  layernorm_forward(ctx, ln2, slot.stat(a.ln2_mean), slot.stat(a.ln2_rstd), res2, p + w.ln2_w,
                    p + w.ln2_b, R, C);                                      // (B5)
  matmul_forward(ctx, fch, ln2, p + w.fc_w, p + w.fc_b, none, R, C, 4 * C);  // (B6)
  gelu_forward(ctx, fch_gelu, fch, R * 4 * C);                               // (B7)
  matmul_forward(ctx, slot.value<floatX>(a.out), fch_gelu, p + w.fcproj_w, p + w.fcproj_b, res2, R,
                 4 * C, C);  // (B8)
}

template <typename floatX>
void Stage::block_backward(const floatX* p, float* g, const model::BlockOffsets& w, const floatX* x,
                           const ActivationSlot& slot, const model::BlockActivations& a,
                           const floatX* dy, floatX* dx, floatX* keep) {
  const std::size_t B = shape_.batch, T = shape_.seq_len, R = shape_.rows();
  const std::size_t C = shape_.config.d_model, NH = shape_.config.heads;
  const OpContext ctx = resources_.context();
  floatX* dfch = dfch_.as<floatX>();
  floatX* dln = dln_.as<floatX>();
  floatX* dres2 = dres2_.as<floatX>();
  floatX* datty = datty_.as<floatX>();
  floatX* dqkv = dqkv_.as<floatX>();
  // Split (g null): each matmul and LayerNorm computes its input gradient only, and the output
  // gradient its weights need is kept, in the order block_backward_weight reads them.
  std::size_t at = 0;
  const auto matmul = [&](floatX* dinp, std::size_t dw, std::size_t db, const floatX* dout,
                          const floatX* inp, std::size_t wt, std::size_t in, std::size_t out) {
    if (g != nullptr) {
      matmul_backward(ctx, dinp, g + dw, g + db, dout, inp, p + wt, R, in, out);
      return;
    }
    copy_device(stream(), keep + at, dout, R * out);
    at += padded(R * out);
    matmul_backward_input(ctx, dinp, dout, p + wt, R, in, out);
  };
  const auto layernorm = [&](floatX* dinp, std::size_t dw, std::size_t db, const floatX* dout,
                             const floatX* inp, std::size_t wt, const float* mean,
                             const float* rstd) {
    if (g != nullptr) {
      layernorm_backward(ctx, dinp, g + dw, g + db, dout, inp, p + wt, mean, rstd, R, C);
      return;
    }
    copy_device(stream(), keep + at, dout, R * C);
    at += padded(R * C);
    layernorm_backward_input(ctx, dinp, dout, inp, p + wt, mean, rstd, R, C);
  };
  // (B8) out = res2 + fch_gelu·Wᵀ + b: the residual passes dy through to dres2 below.
  matmul(dfch, w.fcproj_w, w.fcproj_b, dy, slot.value<floatX>(a.fch_gelu), w.fcproj_w, 4 * C, C);
  gelu_backward(ctx, dfch, slot.value<floatX>(a.fch), dfch, R * 4 * C);            // (B7)
  matmul(dln, w.fc_w, w.fc_b, dfch, slot.value<floatX>(a.ln2), w.fc_w, C, 4 * C);  // (B6)
  copy_device(stream(), dres2, dy, R * C);
  layernorm(dres2, w.ln2_w, w.ln2_b, dln, slot.value<floatX>(a.residual2), w.ln2_w,
            slot.stat(a.ln2_mean), slot.stat(a.ln2_rstd));  // (B5)
  // (B4) res2 = x + atty·Wᵀ + b: the residual passes dres2 through to dx below.
  matmul(datty, w.attproj_w, w.attproj_b, dres2, slot.value<floatX>(a.atty), w.attproj_w, C, C);
  attention_backward(ctx, dqkv, scores_.data(), dsoft_.as<floatX>(), datty,
                     slot.value<floatX>(a.qkv), slot.value<floatX>(a.att), B, T, C, NH);  // (B3)
  matmul(dln, w.qkv_w, w.qkv_b, dqkv, slot.value<floatX>(a.ln1), w.qkv_w, C, 3 * C);      // (B2)
  copy_device(stream(), dx, dres2, R * C);
  layernorm(dx, w.ln1_w, w.ln1_b, dln, x, w.ln1_w, slot.stat(a.ln1_mean),
            slot.stat(a.ln1_rstd));  // (B1)
}

template <typename floatX>
void Stage::block_backward_weight(float* g, const model::BlockOffsets& w, const floatX* x,
                                  const ActivationSlot& slot, const model::BlockActivations& a,
                                  const floatX* kept) {
  const std::size_t R = shape_.rows(), C = shape_.config.d_model;
  const OpContext ctx = resources_.context();
  // In block_backward's order, from what it kept.
  matmul_backward_weight(ctx, g + w.fcproj_w, g + w.fcproj_b, kept, slot.value<floatX>(a.fch_gelu),
                         R, 4 * C, C);
  kept += padded(R * C);
  matmul_backward_weight(ctx, g + w.fc_w, g + w.fc_b, kept, slot.value<floatX>(a.ln2), R, C, 4 * C);
  kept += padded(R * 4 * C);
  layernorm_backward_weight(ctx, g + w.ln2_w, g + w.ln2_b, kept, slot.value<floatX>(a.residual2),
                            slot.stat(a.ln2_mean), slot.stat(a.ln2_rstd), R, C);
  kept += padded(R * C);
  matmul_backward_weight(ctx, g + w.attproj_w, g + w.attproj_b, kept, slot.value<floatX>(a.atty), R,
                         C, C);
  kept += padded(R * C);
  matmul_backward_weight(ctx, g + w.qkv_w, g + w.qkv_b, kept, slot.value<floatX>(a.ln1), R, C,
                         3 * C);
  kept += padded(R * 3 * C);
  layernorm_backward_weight(ctx, g + w.ln1_w, g + w.ln1_b, kept, x, slot.stat(a.ln1_mean),
                            slot.stat(a.ln1_rstd), R, C);
}

template <typename floatX>
const floatX* Stage::top_output(const ActivationSlot& slot) const {
  return shape_.range.num_layers == 0 ? slot.value<floatX>(slot.input_)
                                      : slot.value<floatX>(slot.blocks_.back().out);
}

TokenGroups Stage::token_groups(const ActivationSlot& slot) const {
  return {slot.ids_.data() + slot.group_rows_, slot.ids_.data() + slot.group_starts_,
          slot.ids_.data() + slot.group_ids_, slot.group_count_};
}

// Layout of a stash: [loss gradient (R·V), final LayerNorm's (R·C)] on the last stage, then
// blocks n-1 .. 0 (the backward's order), then the encoder's (R·C) on the first stage.
template <typename floatX>
void Stage::run_backward(const floatX* p, float* g, const ActivationSlot& slot,
                         const floatX* d_output, floatX* d_input, floatX* keep) {
  const std::size_t B = shape_.batch, T = shape_.seq_len, R = shape_.rows();
  const std::size_t C = shape_.config.d_model, V = shape_.config.vocab;
  const OpContext ctx = resources_.context();
  const std::size_t n = shape_.range.num_layers;
  const floatX* top = top_output<floatX>(slot);
  floatX* dres_a = dres_a_.as<floatX>();
  floatX* dres_b = dres_b_.as<floatX>();
  const floatX* dy = d_output;
  if (is_last()) {
    // (H3) loss = mean over R rows of −log softmax, scaled: d(row loss) = loss_scale / R.
    floatX* dlogits = dlogits_.as<floatX>();
    floatX* dln = dln_.as<floatX>();
    const std::size_t Vp = logits_ld_;
    crossentropy_backward(ctx, dlogits, slot.stat(slot.probs_), slot.ids_.data() + slot.targets_,
                          slot.loss_scale_ / static_cast<float>(R), R, V, Vp);
    PACI_CUDA_CHECK(cudaMemsetAsync(dres_a, 0, R * C * sizeof(floatX), stream()));
    if (g != nullptr) {
      matmul_backward(ctx, dln, g + layout_.lm_head(), nullptr, dlogits,
                      slot.value<floatX>(slot.lnf_), p + layout_.lm_head(), R, C, V, Vp);  // (H2)
      layernorm_backward(ctx, dres_a, g + layout_.ln_f_w(), g + layout_.ln_f_b(), dln, top,
                         p + layout_.ln_f_w(), slot.stat(slot.lnf_mean_), slot.stat(slot.lnf_rstd_),
                         R, C);  // (H1)
    } else {
      copy_device(stream(), keep, static_cast<const floatX*>(dlogits), R * Vp);
      keep += padded(R * Vp);
      matmul_backward_input(ctx, dln, static_cast<const floatX*>(dlogits), p + layout_.lm_head(), R,
                            C, V, Vp);
      copy_device(stream(), keep, static_cast<const floatX*>(dln), R * C);
      keep += padded(R * C);
      layernorm_backward_input(ctx, dres_a, static_cast<const floatX*>(dln), top,
                               p + layout_.ln_f_w(), slot.stat(slot.lnf_mean_),
                               slot.stat(slot.lnf_rstd_), R, C);
    }
    dy = dres_a;
  }
  for (std::size_t l = n; l-- > 0;) {
    const floatX* x =
        l == 0 ? slot.value<floatX>(slot.input_) : slot.value<floatX>(slot.blocks_[l - 1].out);
    floatX* dx = dy == dres_a ? dres_b : dres_a;
    if (l == 0 && !is_first()) dx = d_input;  // the first block writes straight out
    block_backward(p, g, layout_.block(l), x, slot, slot.blocks_[l], dy, dx, keep);
    if (keep != nullptr) keep += block_stash_count();
    dy = dx;
  }
  if (is_first()) {
    if (g != nullptr) {
      encoder_backward(ctx, g + layout_.wte(), g + layout_.wpe(), dy, token_groups(slot), B, T,
                       C);  // (E1)
    } else {
      copy_device(stream(), keep, dy, R * C);
    }
  } else if (n == 0) {
    copy_device(stream(), d_input, dy, R * C);
  }
}

template <typename floatX>
void Stage::run_backward_weight(float* g, const ActivationSlot& slot, const floatX* kept) {
  const std::size_t B = shape_.batch, T = shape_.seq_len, R = shape_.rows();
  const std::size_t C = shape_.config.d_model, V = shape_.config.vocab;
  const OpContext ctx = resources_.context();
  const std::size_t n = shape_.range.num_layers;
  const floatX* top = top_output<floatX>(slot);
  if (is_last()) {  // the fused backward's order: head, blocks from the top, encoder
    matmul_backward_weight(ctx, g + layout_.lm_head(), nullptr, kept, slot.value<floatX>(slot.lnf_),
                           R, C, V, logits_ld_);  // (H2)
    kept += padded(R * logits_ld_);
    layernorm_backward_weight(ctx, g + layout_.ln_f_w(), g + layout_.ln_f_b(), kept, top,
                              slot.stat(slot.lnf_mean_), slot.stat(slot.lnf_rstd_), R,
                              C);  // (H1)
    kept += padded(R * C);
  }
  for (std::size_t l = n; l-- > 0;) {
    const floatX* x =
        l == 0 ? slot.value<floatX>(slot.input_) : slot.value<floatX>(slot.blocks_[l - 1].out);
    block_backward_weight(g, layout_.block(l), x, slot, slot.blocks_[l], kept);
    kept += block_stash_count();
  }
  if (is_first()) {
    encoder_backward(ctx, g + layout_.wte(), g + layout_.wpe(), kept, token_groups(slot), B, T,
                     C);  // (E1)
  }
}

void Stage::check_grads(MutableTensorView grads) const {
  PACI_MODEL_CHECK(grads.count == layout_.size() && grads.precision == Precision::fp32,
                   "gradient buffer has {} {} elements, stage needs {} fp32", grads.count,
                   to_string(grads.precision), layout_.size());
}

void Stage::check_backward(TensorView weights, const ActivationSlot& slot, TensorView d_output,
                           MutableTensorView d_input) const {
  check_weights(weights);
  check_slot(slot);
  PACI_MODEL_CHECK(slot.filled(), "backward of a slot that holds no forward");
  const std::size_t R = shape_.rows(), C = shape_.config.d_model;
  if (is_last()) {
    PACI_MODEL_CHECK(d_output.empty(), "the last stage's backward starts from its loss");
  } else {
    PACI_MODEL_CHECK(d_output.count == R * C && d_output.precision == precision_,
                     "d_output needs {} elements in {}, got {}", R * C, to_string(precision_),
                     d_output.count);
  }
  if (is_first()) {
    PACI_MODEL_CHECK(d_input.empty(), "the first stage has no input gradient to return");
  } else {
    PACI_MODEL_CHECK(d_input.count == R * C && d_input.precision == precision_,
                     "d_input needs {} elements in {}, got {}", R * C, to_string(precision_),
                     d_input.count);
  }
}

void Stage::backward(TensorView weights, MutableTensorView grads, const ActivationSlot& slot,
                     TensorView d_output, MutableTensorView d_input) {
  check_grads(grads);
  check_backward(weights, slot, d_output, d_input);
  if (precision_ == Precision::fp32) {
    run_backward(weights.as<float>(), grads.as<float>(), slot,
                 static_cast<const float*>(d_output.data), static_cast<float*>(d_input.data),
                 static_cast<float*>(nullptr));
  } else {
    run_backward(weights.as<bf16>(), grads.as<float>(), slot,
                 static_cast<const bf16*>(d_output.data), static_cast<bf16*>(d_input.data),
                 static_cast<bf16*>(nullptr));
  }
}

std::size_t Stage::padded(std::size_t n) const {
  const std::size_t per = 256 / element_bytes(precision_);  // elements in 256 bytes
  return (n + per - 1) / per * per;
}

std::size_t Stage::block_stash_count() const {
  const std::size_t RC = shape_.rows() * shape_.config.d_model;
  return 4 * padded(RC) + padded(4 * RC) + padded(3 * RC);  // fcproj, fc, ln2, attproj, qkv, ln1
}

std::size_t Stage::head_stash_count() const {
  const std::size_t R = shape_.rows(), C = shape_.config.d_model;
  return (is_last() ? padded(R * logits_ld_) + padded(R * C) : 0) +
         (is_first() ? padded(R * C) : 0);
}

std::size_t Stage::stash_count() const {
  return head_stash_count() + shape_.range.num_layers * block_stash_count();
}

WeightGradStash Stage::make_weight_stash() const {
  return WeightGradStash(precision_, stash_count());
}

void Stage::backward_input(TensorView weights, const ActivationSlot& slot, TensorView d_output,
                           MutableTensorView d_input, WeightGradStash& stash) {
  check_backward(weights, slot, d_output, d_input);
  PACI_MODEL_CHECK(stash.data_.size() == stash_count() && stash.data_.precision() == precision_,
                   "a weight-gradient stash of another stage's size or precision");
  if (precision_ == Precision::fp32) {
    run_backward(weights.as<float>(), static_cast<float*>(nullptr), slot,
                 static_cast<const float*>(d_output.data), static_cast<float*>(d_input.data),
                 stash.data_.as<float>());
  } else {
    run_backward(weights.as<bf16>(), static_cast<float*>(nullptr), slot,
                 static_cast<const bf16*>(d_output.data), static_cast<bf16*>(d_input.data),
                 stash.data_.as<bf16>());
  }
  stash.filled_ = true;
}

void Stage::backward_weight(MutableTensorView grads, const ActivationSlot& slot,
                            WeightGradStash& stash) {
  check_grads(grads);
  check_slot(slot);
  PACI_MODEL_CHECK(stash.data_.size() == stash_count() && stash.data_.precision() == precision_,
                   "a weight-gradient stash of another stage's size or precision");
  PACI_MODEL_CHECK(slot.filled() && stash.filled_,
                   "a weight gradient needs its forward's slot and its input gradient's stash");
  if (precision_ == Precision::fp32)
    run_backward_weight(grads.as<float>(), slot, std::as_const(stash.data_).as<float>());
  else
    run_backward_weight(grads.as<float>(), slot, std::as_const(stash.data_).as<bf16>());
  stash.filled_ = false;
}

}  // namespace paci::cuda
