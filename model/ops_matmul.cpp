// The linear layer through OpenBLAS (model/blas.hpp): forward with bias and an optional fused
// residual, backward for the input, the weight and the bias. Bias gradients sum rows in order.
#include <algorithm>
#include <cstring>

#include "model/ops.hpp"

namespace paci::model {
namespace {

inline constexpr std::size_t kChannelBlock = 16;

}  // namespace

void matmul_forward(const OpContext& ctx, float* out, const float* inp, const float* weight,
                    const float* bias, const float* residual, std::size_t R, std::size_t C,
                    std::size_t OC) {
  // out = residual + bias, then out += inp·weightᵀ in the GEMM (beta = 1).
  float beta = 0.0f;
  if (bias != nullptr || residual != nullptr) {
    beta = 1.0f;
#pragma omp parallel for num_threads(team(ctx)) if (parallel : ctx.threads > 1) schedule(static)
    for (std::size_t r = 0; r < R; ++r) {
      float* o = out + r * OC;
      if (residual != nullptr) {
        const float* x = residual + r * OC;
        if (bias != nullptr) {
          for (std::size_t c = 0; c < OC; ++c) o[c] = x[c] + bias[c];
        } else {
          std::memcpy(o, x, OC * sizeof(float));
        }
      } else {
        std::memcpy(o, bias, OC * sizeof(float));
      }
    }
  }
  // (M1) out(R,OC) += inp(R,C)·weight(OC,C)ᵀ
  gemm(ctx, Transpose::no, Transpose::yes, R, OC, C, 1.0f, inp, C, weight, C, beta, out, OC);
}

// Differentiates (M1): dinp = dout·weight, dweight += doutᵀ·inp, dbias += Σ_r dout.
void matmul_backward_input(const OpContext& ctx, float* dinp, const float* dout,
                           const float* weight, std::size_t R, std::size_t C, std::size_t OC) {
  gemm(ctx, Transpose::no, Transpose::no, R, C, OC, 1.0f, dout, OC, weight, C, 0.0f, dinp, C);
}

void matmul_backward_weight(const OpContext& ctx, float* dweight, float* dbias, const float* dout,
                            const float* inp, std::size_t R, std::size_t C, std::size_t OC) {
  // dweight gains this micro-batch's product in one addition per element (gemm_accumulate).
  gemm_accumulate(ctx, Transpose::yes, Transpose::no, OC, C, R, 1.0f, dout, OC, inp, C, dweight, C);
  if (dbias == nullptr) return;
#pragma omp parallel for num_threads(team(ctx)) if (parallel : ctx.threads > 1) schedule(static)
  for (std::size_t block = 0; block < (OC + kChannelBlock - 1) / kChannelBlock; ++block) {
    const std::size_t c0 = block * kChannelBlock, c1 = std::min(OC, c0 + kChannelBlock);
    float sum[kChannelBlock] = {};  // this micro-batch's sum first, then one add (like dweight)
    for (std::size_t r = 0; r < R; ++r) {
      const float* d = dout + r * OC;
      for (std::size_t c = c0; c < c1; ++c) sum[c - c0] += d[c];
    }
    for (std::size_t c = c0; c < c1; ++c) dbias[c] += sum[c - c0];
  }
}

void matmul_backward(const OpContext& ctx, float* dinp, float* dweight, float* dbias,
                     const float* dout, const float* inp, const float* weight, std::size_t R,
                     std::size_t C, std::size_t OC) {
  if (dinp != nullptr) matmul_backward_input(ctx, dinp, dout, weight, R, C, OC);
  matmul_backward_weight(ctx, dweight, dbias, dout, inp, R, C, OC);
}

}  // namespace paci::model
