// Stage forward/backward: the encoder, the pre-LN blocks x + attn(ln1(x)), then + mlp(ln2(.)),
// and the head with the fused loss, built from model/ops.hpp. Each backward mirrors its forward.
#include "model/stage.hpp"

#include <algorithm>
#include <cstring>

#include "model/check.hpp"
#include "model/ops.hpp"

namespace paci::model {
namespace {}  // namespace

Stage::Stage(const StageShape& shape, std::size_t threads)
    : shape_(shape), layout_(shape.config, shape.range, shape.experts) {
  shape_.validate();
  set_threads(threads);
  if (blas_threads() != 1) set_blas_threads(1);
  const std::size_t R = shape.rows(), C = shape.config.d_model, V = shape.config.vocab;
  if (is_last()) {
    logits_.resize(R * V);
    dlogits_.resize(R * V);
  }
  dres_a_.resize(R * C);
  dres_b_.resize(R * C);
  if (shape.range.num_layers > 0) {
    dres2_.resize(R * C);
    datty_.resize(R * C);
    dqkv_.resize(3 * R * C);
    if (!shape.config.moe.enabled()) dfch_.resize(4 * R * C);
    datt_.resize(shape.batch * shape.config.heads * shape.seq_len * shape.seq_len);
  }
  if (shape.range.num_layers > 0 || is_last()) dln_.resize(R * C);
  const MoeConfig& m = shape.config.moe;
  if (m.enabled() && shape.range.num_layers > 0) {
    const std::size_t N = R * m.top_k, H = m.hidden;
    router_.resize(R * m.experts);
    dgates_.resize(N);
    dxe_.resize(N * C);
    dh_.resize(N * H);
    moe_kept_.resize(moe_stash_floats());
    route_scratch_.resize(m.experts);
  }
}

void Stage::set_threads(std::size_t threads) {
  PACI_MODEL_CHECK(threads > 0, "a stage needs at least one thread");
  threads_ = threads;
}

void Stage::check_params(std::span<const float> params) const {
  PACI_MODEL_CHECK(params.size() == layout_.size(),
                   "parameter buffer has {} floats, stage needs {}", params.size(), layout_.size());
}

void Stage::check_slot(const ActivationSlot& slot) const {
  PACI_MODEL_CHECK(slot.shape() == shape_, "activation slot was made for another stage shape");
}

std::span<const float> Stage::logits() const {
  PACI_MODEL_CHECK(is_last(), "only the last stage computes logits");
  return logits_;
}

const float* Stage::run_forward(const float* p, const StageInput& input, ActivationSlot& slot) {
  check_slot(slot);
  const std::size_t B = shape_.batch, T = shape_.seq_len, C = shape_.config.d_model;
  float* x = slot.data(slot.input_);  // (R,C)
  if (is_first()) {
    PACI_MODEL_CHECK(input.is_tokens() && input.token_ids().size() == B * T,
                     "first stage needs {} token ids (B={}, T={})", B * T, B, T);
    check_token_ids(input.token_ids(), shape_.config.vocab, "token");
    std::copy(input.token_ids().begin(), input.token_ids().end(), slot.tokens_.begin());
    encoder_forward(ctx(), x, slot.tokens_.data(), p + layout_.wte(), p + layout_.wpe(), B, T, C);
  } else {
    PACI_MODEL_CHECK(!input.is_tokens() && input.values().size() == B * T * C,
                     "stage needs {} input activations (B={}, T={}, C={}), got {}", B * T * C, B, T,
                     C, input.values().size());
    std::memcpy(x, input.values().data(), B * T * C * sizeof(float));
  }
  for (std::size_t l = 0; l < shape_.range.num_layers; ++l) {
    const BlockActivations& a = slot.blocks_[l];
    block_forward(p, layout_.block(l), x, slot, a);
    x = slot.data(a.out);
  }
  slot.filled_ = true;
  return x;
}

std::span<const float> Stage::forward(std::span<const float> params, const StageInput& input,
                                      ActivationSlot& slot, float loss_scale) {
  PACI_MODEL_CHECK(!is_last(), "the last stage's forward needs targets: call forward_loss");
  check_params(params);
  slot.filled_ = false;
  slot.loss_scale_ = loss_scale;
  run_forward(params.data(), input, slot);
  return slot.output();
}

float Stage::forward_loss(std::span<const float> params, const StageInput& input,
                          std::span<const std::int32_t> targets, float loss_scale,
                          ActivationSlot& slot) {
  PACI_MODEL_CHECK(is_last(), "only the last stage computes the loss: call forward");
  check_params(params);
  const std::size_t R = shape_.rows(), C = shape_.config.d_model, V = shape_.config.vocab;
  PACI_MODEL_CHECK(targets.size() == R, "loss needs {} targets, got {}", R, targets.size());
  check_token_ids(targets, V, "target");
  slot.filled_ = false;
  slot.loss_scale_ = loss_scale;
  const float* p = params.data();
  const float* x = run_forward(p, input, slot);
  std::copy(targets.begin(), targets.end(), slot.targets_.begin());
  float* lnf = slot.data(slot.lnf_);
  layernorm_forward(ctx(), lnf, slot.data(slot.lnf_mean_), slot.data(slot.lnf_rstd_), x,
                    p + layout_.ln_f_w(), p + layout_.ln_f_b(), R, C);  // (H1)
  matmul_forward(ctx(), logits_.data(), lnf, p + layout_.lm_head(), nullptr, nullptr, R, C,
                 V);  // (H2) untied head, no bias
  return crossentropy_forward(ctx(), slot.data(slot.probs_), slot.data(slot.losses_),
                              logits_.data(), slot.targets_.data(), R, V);  // (H3)
}

void Stage::block_forward(const float* p, const BlockOffsets& w, const float* x,
                          ActivationSlot& slot, const BlockActivations& a) {
  const std::size_t B = shape_.batch, T = shape_.seq_len, R = shape_.rows();
  const std::size_t C = shape_.config.d_model, NH = shape_.config.heads;
  float* ln1 = slot.data(a.ln1);
  float* qkv = slot.data(a.qkv);
  float* atty = slot.data(a.atty);
  float* res2 = slot.data(a.residual2);
  float* ln2 = slot.data(a.ln2);
  float* fch = slot.data(a.fch);
  float* fch_gelu = slot.data(a.fch_gelu);
  layernorm_forward(ctx(), ln1, slot.data(a.ln1_mean), slot.data(a.ln1_rstd), x, p + w.ln1_w,
                    p + w.ln1_b, R, C);                                             // (B1)
  matmul_forward(ctx(), qkv, ln1, p + w.qkv_w, p + w.qkv_b, nullptr, R, C, 3 * C);  // (B2)
  attention_forward(ctx(), atty, slot.data(a.att), qkv, B, T, C, NH);               // (B3)
  matmul_forward(ctx(), res2, atty, p + w.attproj_w, p + w.attproj_b, x, R, C, C);  // (B4)
  layernorm_forward(ctx(), ln2, slot.data(a.ln2_mean), slot.data(a.ln2_rstd), res2, p + w.ln2_w,
                    p + w.ln2_b, R, C);  // (B5)
  if (shape_.config.moe.enabled()) {
    moe_forward(p, w, slot, a);  // (B6-B8) out = res2 + moe(ln2)
    return;
  }
  matmul_forward(ctx(), fch, ln2, p + w.fc_w, p + w.fc_b, nullptr, R, C, 4 * C);  // (B6)
  gelu_forward(ctx(), fch_gelu, fch, R * 4 * C);                                  // (B7)
  matmul_forward(ctx(), slot.data(a.out), fch_gelu, p + w.fcproj_w, p + w.fcproj_b, res2, R, 4 * C,
                 C);  // (B8)
}

void Stage::block_backward(const float* p, float* g, const BlockOffsets& w, const float* x,
                           const ActivationSlot& slot, const BlockActivations& a, const float* dy,
                           float* dx, float* keep) {
  const std::size_t B = shape_.batch, T = shape_.seq_len, R = shape_.rows();
  const std::size_t C = shape_.config.d_model, NH = shape_.config.heads;
  // Split (g null): each matmul and LayerNorm computes its input gradient only, and the output
  // gradient its weights need is kept, in the order block_backward_weight reads them.
  const auto matmul = [&](float* dinp, std::size_t dw, std::size_t db, const float* dout,
                          const float* inp, std::size_t wt, std::size_t in, std::size_t out,
                          std::size_t& at) {
    if (g != nullptr) {
      matmul_backward(ctx(), dinp, g + dw, g + db, dout, inp, p + wt, R, in, out);
      return;
    }
    std::memcpy(keep + at, dout, R * out * sizeof(float));
    at += R * out;
    matmul_backward_input(ctx(), dinp, dout, p + wt, R, in, out);
  };
  const auto layernorm = [&](float* dinp, std::size_t dw, std::size_t db, const float* dout,
                             const float* inp, std::size_t wt, const float* mean, const float* rstd,
                             std::size_t& at) {
    if (g != nullptr) {
      layernorm_backward(ctx(), dinp, g + dw, g + db, dout, inp, p + wt, mean, rstd, R, C);
      return;
    }
    std::memcpy(keep + at, dout, R * C * sizeof(float));
    at += R * C;
    layernorm_backward_input(ctx(), dinp, dout, inp, p + wt, mean, rstd, R, C);
  };
  std::size_t at = 0;
  if (shape_.config.moe.enabled()) {  // (B6-B8) out = res2 + moe(ln2)
    moe_backward(p, g, w, slot, a, dy, keep);
    at += moe_stash_floats();
  } else {
    // (B8) out = res2 + fch_gelu·Wᵀ + b: the residual passes dy through to dres2 below.
    matmul(dfch_.data(), w.fcproj_w, w.fcproj_b, dy, slot.data(a.fch_gelu), w.fcproj_w, 4 * C, C,
           at);
    gelu_backward(ctx(), dfch_.data(), slot.data(a.fch), dfch_.data(), R * 4 * C);  // (B7)
    matmul(dln_.data(), w.fc_w, w.fc_b, dfch_.data(), slot.data(a.ln2), w.fc_w, C, 4 * C,
           at);  // (B6)
  }
  std::memcpy(dres2_.data(), dy, R * C * sizeof(float));
  layernorm(dres2_.data(), w.ln2_w, w.ln2_b, dln_.data(), slot.data(a.residual2), w.ln2_w,
            slot.data(a.ln2_mean), slot.data(a.ln2_rstd), at);  // (B5)
  // (B4) res2 = x + atty·Wᵀ + b: the residual passes dres2 through to dx below.
  matmul(datty_.data(), w.attproj_w, w.attproj_b, dres2_.data(), slot.data(a.atty), w.attproj_w, C,
         C, at);
  attention_backward(ctx(), dqkv_.data(), datt_.data(), datty_.data(), slot.data(a.qkv),
                     slot.data(a.att), B, T, C, NH);  // (B3)
  matmul(dln_.data(), w.qkv_w, w.qkv_b, dqkv_.data(), slot.data(a.ln1), w.qkv_w, C, 3 * C,
         at);  // (B2)
  std::memcpy(dx, dres2_.data(), R * C * sizeof(float));
  layernorm(dx, w.ln1_w, w.ln1_b, dln_.data(), x, w.ln1_w, slot.data(a.ln1_mean),
            slot.data(a.ln1_rstd), at);  // (B1)
}

void Stage::block_backward_weight(float* g, const BlockOffsets& w, const float* x,
                                  const ActivationSlot& slot, const BlockActivations& a,
                                  const float* kept) {
  const std::size_t R = shape_.rows(), C = shape_.config.d_model;
  // In block_backward's order, from what it kept.
  if (shape_.config.moe.enabled()) {
    moe_backward_weight(g, w, slot, a, kept);
    kept += moe_stash_floats();
  } else {
    matmul_backward_weight(ctx(), g + w.fcproj_w, g + w.fcproj_b, kept, slot.data(a.fch_gelu), R,
                           4 * C, C);
    kept += R * C;
    matmul_backward_weight(ctx(), g + w.fc_w, g + w.fc_b, kept, slot.data(a.ln2), R, C, 4 * C);
    kept += R * 4 * C;
  }
  layernorm_backward_weight(ctx(), g + w.ln2_w, g + w.ln2_b, kept, slot.data(a.residual2),
                            slot.data(a.ln2_mean), slot.data(a.ln2_rstd), R, C);
  kept += R * C;
  matmul_backward_weight(ctx(), g + w.attproj_w, g + w.attproj_b, kept, slot.data(a.atty), R, C, C);
  kept += R * C;
  matmul_backward_weight(ctx(), g + w.qkv_w, g + w.qkv_b, kept, slot.data(a.ln1), R, C, 3 * C);
  kept += R * 3 * C;
  layernorm_backward_weight(ctx(), g + w.ln1_w, g + w.ln1_b, kept, x, slot.data(a.ln1_mean),
                            slot.data(a.ln1_rstd), R, C);
}

std::size_t Stage::block_stash_floats() const {
  const std::size_t RC = shape_.rows() * shape_.config.d_model;
  return shape_.config.moe.enabled() ? moe_stash_floats() + 6 * RC : 11 * RC;
}

std::size_t Stage::head_stash_floats() const {
  const std::size_t R = shape_.rows(), C = shape_.config.d_model, V = shape_.config.vocab;
  return (is_last() ? R * V + R * C : 0) + (is_first() ? R * C : 0);
}

WeightGradStash Stage::make_weight_stash() const {
  return WeightGradStash(head_stash_floats() + shape_.range.num_layers * block_stash_floats());
}

void Stage::backward(std::span<const float> params, std::span<float> grads,
                     const ActivationSlot& slot, std::span<const float> d_output,
                     std::span<float> d_input) {
  PACI_MODEL_CHECK(grads.size() == layout_.size(), "gradient buffer has {} floats, stage needs {}",
                   grads.size(), layout_.size());
  run_backward(params, grads.data(), slot, d_output, d_input, nullptr);
}

void Stage::backward_input(std::span<const float> params, const ActivationSlot& slot,
                           std::span<const float> d_output, std::span<float> d_input,
                           WeightGradStash& stash) {
  PACI_MODEL_CHECK(
      stash.data_.size() == head_stash_floats() + shape_.range.num_layers * block_stash_floats(),
      "a weight-gradient stash of another stage's size");
  run_backward(params, nullptr, slot, d_output, d_input, &stash);
  stash.filled_ = true;
}

// Layout of a stash: [loss gradient (R·V), final LayerNorm's (R·C)] on the last stage, then
// blocks n-1 .. 0 (the backward's order), then the encoder's (R·C) on the first stage.
void Stage::run_backward(std::span<const float> params, float* g, const ActivationSlot& slot,
                         std::span<const float> d_output, std::span<float> d_input,
                         WeightGradStash* stash) {
  check_params(params);
  check_slot(slot);
  PACI_MODEL_CHECK(slot.filled(), "backward of a slot that holds no forward");
  const std::size_t B = shape_.batch, T = shape_.seq_len, R = shape_.rows();
  const std::size_t C = shape_.config.d_model, V = shape_.config.vocab;
  const float* p = params.data();
  float* keep = stash ? stash->data_.data() : nullptr;
  const std::size_t n = shape_.range.num_layers;
  const float* top = n == 0 ? slot.data(slot.input_) : slot.data(slot.blocks_.back().out);
  const float* dy = nullptr;
  if (is_last()) {
    PACI_MODEL_CHECK(d_output.empty(), "the last stage's backward starts from its loss");
    // (H3) loss = mean over R rows of −log softmax, scaled: d(row loss) = loss_scale / R.
    crossentropy_backward(ctx(), dlogits_.data(), slot.data(slot.probs_), slot.targets_.data(),
                          slot.loss_scale_ / static_cast<float>(R), R, V);
    std::fill(dres_a_.begin(), dres_a_.end(), 0.0f);
    if (g != nullptr) {
      matmul_backward(ctx(), dln_.data(), g + layout_.lm_head(), nullptr, dlogits_.data(),
                      slot.data(slot.lnf_), p + layout_.lm_head(), R, C, V);  // (H2)
      layernorm_backward(ctx(), dres_a_.data(), g + layout_.ln_f_w(), g + layout_.ln_f_b(),
                         dln_.data(), top, p + layout_.ln_f_w(), slot.data(slot.lnf_mean_),
                         slot.data(slot.lnf_rstd_), R, C);  // (H1)
    } else {
      std::memcpy(keep, dlogits_.data(), R * V * sizeof(float));
      keep += R * V;
      matmul_backward_input(ctx(), dln_.data(), dlogits_.data(), p + layout_.lm_head(), R, C, V);
      std::memcpy(keep, dln_.data(), R * C * sizeof(float));
      keep += R * C;
      layernorm_backward_input(ctx(), dres_a_.data(), dln_.data(), top, p + layout_.ln_f_w(),
                               slot.data(slot.lnf_mean_), slot.data(slot.lnf_rstd_), R, C);
    }
    dy = dres_a_.data();
  } else {
    PACI_MODEL_CHECK(d_output.size() == R * C,
                     "d_output needs {} floats (B={}, T={}, C={}), got {}", R * C, B, T, C,
                     d_output.size());
    dy = d_output.data();
  }
  if (is_first()) {
    PACI_MODEL_CHECK(d_input.empty(), "the first stage has no input gradient to return");
  } else {
    PACI_MODEL_CHECK(d_input.size() == R * C, "d_input needs {} floats, got {}", R * C,
                     d_input.size());
  }
  for (std::size_t l = n; l-- > 0;) {
    const float* x = l == 0 ? slot.data(slot.input_) : slot.data(slot.blocks_[l - 1].out);
    float* dx = dy == dres_a_.data() ? dres_b_.data() : dres_a_.data();
    if (l == 0 && !is_first()) dx = d_input.data();  // the first block writes straight out
    block_backward(p, g, layout_.block(l), x, slot, slot.blocks_[l], dy, dx, keep);
    if (keep != nullptr) keep += block_stash_floats();
    dy = dx;
  }
  if (is_first()) {
    if (g != nullptr)
      encoder_backward(ctx(), g + layout_.wte(), g + layout_.wpe(), dy, slot.tokens_.data(), B, T,
                       C);  // (E1)
    else
      std::memcpy(keep, dy, R * C * sizeof(float));
  } else if (n == 0) {
    std::memcpy(d_input.data(), dy, R * C * sizeof(float));
  }
}

void Stage::backward_weight(std::span<float> grads, const ActivationSlot& slot,
                            WeightGradStash& stash) {
  PACI_MODEL_CHECK(grads.size() == layout_.size(), "gradient buffer has {} floats, stage needs {}",
                   grads.size(), layout_.size());
  check_slot(slot);
  PACI_MODEL_CHECK(slot.filled() && stash.filled_,
                   "a weight gradient needs its forward's slot and its input gradient's stash");
  const std::size_t B = shape_.batch, T = shape_.seq_len, R = shape_.rows();
  const std::size_t C = shape_.config.d_model, V = shape_.config.vocab;
  float* g = grads.data();
  const float* kept = stash.data_.data();
  const std::size_t n = shape_.range.num_layers;
  const float* top = n == 0 ? slot.data(slot.input_) : slot.data(slot.blocks_.back().out);
  if (is_last()) {  // the fused backward's order: head, blocks from the top, encoder
    matmul_backward_weight(ctx(), g + layout_.lm_head(), nullptr, kept, slot.data(slot.lnf_), R, C,
                           V);  // (H2)
    kept += R * V;
    layernorm_backward_weight(ctx(), g + layout_.ln_f_w(), g + layout_.ln_f_b(), kept, top,
                              slot.data(slot.lnf_mean_), slot.data(slot.lnf_rstd_), R,
                              C);  // (H1)
    kept += R * C;
  }
  for (std::size_t l = n; l-- > 0;) {
    const float* x = l == 0 ? slot.data(slot.input_) : slot.data(slot.blocks_[l - 1].out);
    block_backward_weight(g, layout_.block(l), x, slot, slot.blocks_[l], kept);
    kept += block_stash_floats();
  }
  if (is_first())
    encoder_backward(ctx(), g + layout_.wte(), g + layout_.wpe(), kept, slot.tokens_.data(), B, T,
                     C);  // (E1)
  stash.filled_ = false;
}

}  // namespace paci::model
