// Causal multi-head attention on the GPU: the four products per sequence as cuBLAS GEMMs batched
// over the heads (strided views into qkv, no permute copies), the causal softmax and its backward
// as one-warp-per-row kernels. Computes the full T×T scores; the softmax masks above the diagonal.
#include <cmath>

#include "cuda/gemm.hpp"
#include "cuda/kernels.cuh"
#include "cuda/ops.hpp"

namespace paci::cuda {
namespace {

using kernels::from_float;
using kernels::to_float;
using kernels::warp_max;
using kernels::warp_sum;

constexpr unsigned kThreads = 256;
constexpr unsigned kWarpsPerBlock = kThreads / 32;

// Row `row` of the (B,NH,T,T) scores is query t = row % T: keys 0..t are visible.
template <typename floatX>
__global__ void causal_softmax_kernel(floatX* att, const float* scores, std::size_t rows,
                                      std::size_t T) {
  const std::size_t row = blockIdx.x * static_cast<std::size_t>(kWarpsPerBlock) + threadIdx.x / 32;
  const unsigned lane = threadIdx.x % 32;
  if (row >= rows) return;
  const std::size_t t = row % T;
  const float* s = scores + row * T;
  floatX* a = att + row * T;
  float smax = -INFINITY;
  for (std::size_t j = lane; j <= t; j += 32) smax = fmaxf(smax, s[j]);
  smax = warp_max(smax);
  float sum = 0.0f;
  for (std::size_t j = lane; j <= t; j += 32) sum += expf(s[j] - smax);
  const float inv = 1.0f / warp_sum(sum);
  for (std::size_t j = lane; j < T; j += 32) {
    a[j] = from_float<floatX>(j <= t ? expf(s[j] - smax) * inv : 0.0f);  // (A2)
  }
}

// Differentiates (A2): dS = A ⊙ (dA − Σ_j A·dA) on and below the diagonal, 0 above.
template <typename floatX>
__global__ void causal_softmax_backward_kernel(floatX* dsoft, const float* datt, const floatX* att,
                                               std::size_t rows, std::size_t T) {
  const std::size_t row = blockIdx.x * static_cast<std::size_t>(kWarpsPerBlock) + threadIdx.x / 32;
  const unsigned lane = threadIdx.x % 32;
  if (row >= rows) return;
  const std::size_t t = row % T;
  const float* g = datt + row * T;
  const floatX* a = att + row * T;
  float dot = 0.0f;
  for (std::size_t j = lane; j <= t; j += 32) dot += to_float(a[j]) * g[j];
  dot = warp_sum(dot);
  floatX* d = dsoft + row * T;
  for (std::size_t j = lane; j < T; j += 32) {
    d[j] = from_float<floatX>(j <= t ? to_float(a[j]) * (g[j] - dot) : 0.0f);
  }
}

unsigned row_blocks(std::size_t rows) {
  return static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

}  // namespace

template <typename floatX>
void attention_forward(const OpContext& ctx, floatX* out, floatX* att, float* scores,
                       const floatX* qkv, std::size_t B, std::size_t T, std::size_t C,
                       std::size_t NH) {
  if (B * T == 0) return;
  const std::size_t HS = C / NH, C3 = 3 * C, TT = T * T;
  const auto hs = static_cast<long long>(HS), tt = static_cast<long long>(TT);
  const cudaDataType_t type = data_type<floatX>();
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
  for (std::size_t b = 0; b < B; ++b) {  // (A1) S = scale·Q·Kᵀ, the NH heads of sequence b
    const floatX* q = qkv + b * T * C3;
    gemm(ctx, Transpose::no, Transpose::yes, T, T, HS, scale, {q, type, C3, hs},
         {q + C, type, C3, hs}, 0.0f, {scores + b * NH * TT, CUDA_R_32F, T, tt}, NH);
  }
  const std::size_t rows = B * NH * T;
  causal_softmax_kernel<<<row_blocks(rows), kThreads, 0, ctx.stream>>>(att, scores, rows, T);
  PACI_CUDA_CHECK_LAUNCH();
  for (std::size_t b = 0; b < B; ++b) {  // (A3) out = A·V
    const floatX* v = qkv + b * T * C3 + 2 * C;
    gemm(ctx, Transpose::no, Transpose::no, T, HS, T, 1.0f, {att + b * NH * TT, type, T, tt},
         {v, type, C3, hs}, 0.0f, {out + b * T * C, type, C, hs}, NH);
  }
}

template <typename floatX>
void attention_backward(const OpContext& ctx, floatX* dqkv, float* dscores, floatX* dsoft,
                        const floatX* dout, const floatX* qkv, const floatX* att, std::size_t B,
                        std::size_t T, std::size_t C, std::size_t NH) {
  if (B * T == 0) return;
  const std::size_t HS = C / NH, C3 = 3 * C, TT = T * T;
  const auto hs = static_cast<long long>(HS), tt = static_cast<long long>(TT);
  const cudaDataType_t type = data_type<floatX>();
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
  for (std::size_t b = 0; b < B; ++b) {
    const floatX* q = qkv + b * T * C3;
    const floatX* d_o = dout + b * T * C;
    floatX* dq = dqkv + b * T * C3;
    // Differentiates (A3) for A: dA = dO·Vᵀ.
    gemm(ctx, Transpose::no, Transpose::yes, T, T, HS, 1.0f, {d_o, type, C, hs},
         {q + 2 * C, type, C3, hs}, 0.0f, {dscores + b * NH * TT, CUDA_R_32F, T, tt}, NH);
    // Differentiates (A3) for V: dV = Aᵀ·dO (A is zero above the diagonal).
    gemm(ctx, Transpose::yes, Transpose::no, T, HS, T, 1.0f, {att + b * NH * TT, type, T, tt},
         {d_o, type, C, hs}, 0.0f, {dq + 2 * C, type, C3, hs}, NH);
  }
  const std::size_t rows = B * NH * T;
  causal_softmax_backward_kernel<<<row_blocks(rows), kThreads, 0, ctx.stream>>>(dsoft, dscores, att,
                                                                                rows, T);
  PACI_CUDA_CHECK_LAUNCH();
  for (std::size_t b = 0; b < B; ++b) {
    const floatX* q = qkv + b * T * C3;
    const floatX* ds = dsoft + b * NH * TT;
    floatX* dq = dqkv + b * T * C3;
    // Differentiates (A1) for Q: dQ = scale·dS·K.
    gemm(ctx, Transpose::no, Transpose::no, T, HS, T, scale, {ds, type, T, tt},
         {q + C, type, C3, hs}, 0.0f, {dq, type, C3, hs}, NH);
    // Differentiates (A1) for K: dK = scale·dSᵀ·Q.
    gemm(ctx, Transpose::yes, Transpose::no, T, HS, T, scale, {ds, type, T, tt}, {q, type, C3, hs},
         0.0f, {dq + C, type, C3, hs}, NH);
  }
}

#define PACI_ATTENTION_INSTANTIATE(X)                                                         \
  template void attention_forward<X>(const OpContext&, X*, X*, float*, const X*, std::size_t, \
                                     std::size_t, std::size_t, std::size_t);                  \
  template void attention_backward<X>(const OpContext&, X*, float*, X*, const X*, const X*,   \
                                      const X*, std::size_t, std::size_t, std::size_t,        \
                                      std::size_t);

PACI_ATTENTION_INSTANTIATE(float)
PACI_ATTENTION_INSTANTIATE(bf16)

}  // namespace paci::cuda
