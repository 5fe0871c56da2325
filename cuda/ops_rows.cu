// Row-wise layers on the GPU: encoder, LayerNorm and GELU, each backward below its forward and
// naming the forward line it differentiates (the same labels as model/ops_rows.cpp). One warp per
// row for the row reductions; parameter gradients through the fixed-order column sums.
#include <string>

#include "cuda/column_sums.cuh"
#include "cuda/kernels.cuh"
#include "cuda/ops.hpp"

namespace paci::cuda {
namespace {

using kernels::from_float;
using kernels::grid_for;
using kernels::to_float;
using kernels::warp_sum;

constexpr unsigned kThreads = 256;
constexpr unsigned kWarpsPerBlock = kThreads / 32;
constexpr float kLayerNormEps = 1e-5f;             // model::kLayerNormEps
constexpr float kGeluScale = 0.7978845608028654f;  // √(2/π)
constexpr float kGeluCubic = 0.044715f;

unsigned row_blocks(std::size_t R) {
  return static_cast<unsigned>((R + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

// ---- encoder ------------------------------------------------------------------------------------
template <typename floatX>
__global__ void encoder_forward_kernel(floatX* out, const std::int32_t* tokens, const floatX* wte,
                                       const floatX* wpe, std::size_t R, std::size_t T,
                                       std::size_t C) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < R * C;
       i += stride) {
    const std::size_t r = i / C, c = i % C;
    const std::size_t token = static_cast<std::size_t>(tokens[r]);
    out[i] =
        from_float<floatX>(to_float(wte[token * C + c]) + to_float(wpe[(r % T) * C + c]));  // (E1)
  }
}

// Differentiates (E1) for wte: one block row per distinct token, a thread per channel, the token's
// rows added in row order: the CPU backend's order, so fp32 gives its bits.
template <typename floatX>
__global__ void encoder_backward_wte_kernel(float* dwte, const floatX* dout, TokenGroups groups,
                                            std::size_t C) {
  const std::size_t c = blockIdx.y * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (c >= C) return;
  const std::size_t group = blockIdx.x;
  float* w = dwte + static_cast<std::size_t>(groups.tokens[group]) * C + c;
  float acc = *w;
  for (std::int32_t i = groups.starts[group]; i < groups.starts[group + 1]; ++i) {
    acc += to_float(dout[static_cast<std::size_t>(groups.rows[i]) * C + c]);
  }
  *w = acc;
}

// Differentiates (E1) for wpe: dwpe[t] += Σ_b dout(b, t), this micro-batch's sum first.
template <typename floatX>
__global__ void encoder_backward_wpe_kernel(float* dwpe, const floatX* dout, std::size_t B,
                                            std::size_t T, std::size_t C) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < T * C;
       i += stride) {
    float sum = 0.0f;
    for (std::size_t b = 0; b < B; ++b) sum += to_float(dout[b * T * C + i]);
    dwpe[i] += sum;
  }
}

// ---- LayerNorm ----------------------------------------------------------------------------------
template <typename floatX>
__global__ void layernorm_forward_kernel(floatX* out, float* mean, float* rstd, const floatX* inp,
                                         const floatX* weight, const floatX* bias, std::size_t R,
                                         std::size_t C) {
  const std::size_t row = blockIdx.x * static_cast<std::size_t>(kWarpsPerBlock) + threadIdx.x / 32;
  const unsigned lane = threadIdx.x % 32;
  if (row >= R) return;  // the whole warp leaves together
  const floatX* x = inp + row * C;
  const float inv_c = 1.0f / static_cast<float>(C);
  float sum = 0.0f;
  for (std::size_t c = lane; c < C; c += 32) sum += to_float(x[c]);
  const float m = warp_sum(sum) * inv_c;  // (N1)
  float squares = 0.0f;
  for (std::size_t c = lane; c < C; c += 32) {
    const float d = to_float(x[c]) - m;
    squares += d * d;
  }
  const float s = 1.0f / sqrtf(warp_sum(squares) * inv_c + kLayerNormEps);
  floatX* o = out + row * C;
  for (std::size_t c = lane; c < C; c += 32) {
    o[c] = from_float<floatX>((to_float(x[c]) - m) * s * to_float(weight[c]) +
                              to_float(bias[c]));  // (N2)
  }
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = s;
  }
}

// Differentiates (N2) through norm = (x − mean)·rstd and (N1)'s statistics, for the input:
//   dinp += rstd·(dnorm − mean(dnorm) − norm·mean(dnorm·norm)),  dnorm = dout·weight.
template <typename floatX>
__global__ void layernorm_backward_input_kernel(floatX* dinp, const floatX* dout, const floatX* inp,
                                                const floatX* weight, const float* mean,
                                                const float* rstd, std::size_t R, std::size_t C) {
  const std::size_t row = blockIdx.x * static_cast<std::size_t>(kWarpsPerBlock) + threadIdx.x / 32;
  const unsigned lane = threadIdx.x % 32;
  if (row >= R) return;
  const floatX* x = inp + row * C;
  const floatX* d = dout + row * C;
  const float m = mean[row], s = rstd[row];
  float sum_d = 0.0f, sum_dn = 0.0f;
  for (std::size_t c = lane; c < C; c += 32) {
    const float dnorm = to_float(d[c]) * to_float(weight[c]);
    sum_d += dnorm;
    sum_dn += dnorm * ((to_float(x[c]) - m) * s);
  }
  const float inv_c = 1.0f / static_cast<float>(C);
  const float mean_d = warp_sum(sum_d) * inv_c, mean_dn = warp_sum(sum_dn) * inv_c;
  floatX* g = dinp + row * C;
  for (std::size_t c = lane; c < C; c += 32) {
    const float norm = (to_float(x[c]) - m) * s;
    const float dnorm = to_float(d[c]) * to_float(weight[c]);
    g[c] = from_float<floatX>(to_float(g[c]) + (dnorm - mean_d - norm * mean_dn) * s);
  }
}

// The (N2) parameter terms of row r: dweight += dout·norm, dbias += dout.
template <typename floatX>
struct LayerNormParamTerms {
  const floatX* dout;
  const floatX* inp;
  const float* mean;
  const float* rstd;
  std::size_t C;
  __device__ void operator()(std::size_t r, std::size_t c, float* s) const {
    const float d = to_float(dout[r * C + c]);
    s[0] += d * ((to_float(inp[r * C + c]) - mean[r]) * rstd[r]);
    s[1] += d;
  }
};

// ---- GELU
// -----------------------------------------------------------------------------------------
template <typename floatX>
__global__ void gelu_forward_kernel(floatX* out, const floatX* inp, std::size_t N) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < N;
       i += stride) {
    const float x = to_float(inp[i]);
    const float u = kGeluScale * (x + kGeluCubic * x * x * x);
    out[i] = from_float<floatX>(0.5f * x * (1.0f + tanhf(u)));  // (G1)
  }
}

// Differentiates (G1): 0.5·(1 + tanh u) + 0.5·x·(1 − tanh² u)·√(2/π)·(1 + 3·0.044715·x²).
template <typename floatX>
__global__ void gelu_backward_kernel(floatX* dinp, const floatX* inp, const floatX* dout,
                                     std::size_t N) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < N;
       i += stride) {
    const float x = to_float(inp[i]);
    const float u = kGeluScale * (x + kGeluCubic * x * x * x);
    const float th = tanhf(u);
    const float du = kGeluScale * (1.0f + 3.0f * kGeluCubic * x * x);
    const float local = 0.5f * (1.0f + th) + 0.5f * x * ((1.0f - th * th) * du);
    dinp[i] = from_float<floatX>(local * to_float(dout[i]));
  }
}

}  // namespace

template <typename floatX>
void encoder_forward(const OpContext& ctx, floatX* out, const std::int32_t* tokens,
                     const floatX* wte, const floatX* wpe, std::size_t B, std::size_t T,
                     std::size_t C) {
  const std::size_t n = B * T * C;
  if (n == 0) return;
  encoder_forward_kernel<<<grid_for(n, kThreads), kThreads, 0, ctx.stream>>>(out, tokens, wte, wpe,
                                                                             B * T, T, C);
  PACI_CUDA_CHECK_LAUNCH();
}

template <typename floatX>
void encoder_backward(const OpContext& ctx, float* dwte, float* dwpe, const floatX* dout,
                      const TokenGroups& groups, std::size_t B, std::size_t T, std::size_t C) {
  if (B * T * C == 0) return;
  PACI_CUDA_REQUIRE(groups.count > 0 && groups.count <= 0x7fffffffu,
                    "token groups: " + std::to_string(groups.count));
  const dim3 grid(static_cast<unsigned>(groups.count), static_cast<unsigned>((C + 127) / 128));
  encoder_backward_wte_kernel<<<grid, 128, 0, ctx.stream>>>(dwte, dout, groups, C);
  PACI_CUDA_CHECK_LAUNCH();
  encoder_backward_wpe_kernel<<<grid_for(T * C, kThreads), kThreads, 0, ctx.stream>>>(dwpe, dout, B,
                                                                                      T, C);
  PACI_CUDA_CHECK_LAUNCH();
}

template <typename floatX>
void layernorm_forward(const OpContext& ctx, floatX* out, float* mean, float* rstd,
                       const floatX* inp, const floatX* weight, const floatX* bias, std::size_t R,
                       std::size_t C) {
  if (R == 0) return;
  layernorm_forward_kernel<<<row_blocks(R), kThreads, 0, ctx.stream>>>(out, mean, rstd, inp, weight,
                                                                       bias, R, C);
  PACI_CUDA_CHECK_LAUNCH();
}

template <typename floatX>
void layernorm_backward_input(const OpContext& ctx, floatX* dinp, const floatX* dout,
                              const floatX* inp, const floatX* weight, const float* mean,
                              const float* rstd, std::size_t R, std::size_t C) {
  if (R == 0) return;
  layernorm_backward_input_kernel<<<row_blocks(R), kThreads, 0, ctx.stream>>>(
      dinp, dout, inp, weight, mean, rstd, R, C);
  PACI_CUDA_CHECK_LAUNCH();
}

template <typename floatX>
void layernorm_backward_weight(const OpContext& ctx, float* dweight, float* dbias,
                               const floatX* dout, const floatX* inp, const float* mean,
                               const float* rstd, std::size_t R, std::size_t C) {
  if (R == 0) return;
  kernels::column_sums<2>(ctx, LayerNormParamTerms<floatX>{dout, inp, mean, rstd, C}, R, C, dweight,
                          dbias);
}

template <typename floatX>
void layernorm_backward(const OpContext& ctx, floatX* dinp, float* dweight, float* dbias,
                        const floatX* dout, const floatX* inp, const floatX* weight,
                        const float* mean, const float* rstd, std::size_t R, std::size_t C) {
  layernorm_backward_input(ctx, dinp, dout, inp, weight, mean, rstd, R, C);
  layernorm_backward_weight(ctx, dweight, dbias, dout, inp, mean, rstd, R, C);
}

template <typename floatX>
void gelu_forward(const OpContext& ctx, floatX* out, const floatX* inp, std::size_t N) {
  if (N == 0) return;
  gelu_forward_kernel<<<grid_for(N, kThreads), kThreads, 0, ctx.stream>>>(out, inp, N);
  PACI_CUDA_CHECK_LAUNCH();
}

template <typename floatX>
void gelu_backward(const OpContext& ctx, floatX* dinp, const floatX* inp, const floatX* dout,
                   std::size_t N) {
  if (N == 0) return;
  gelu_backward_kernel<<<grid_for(N, kThreads), kThreads, 0, ctx.stream>>>(dinp, inp, dout, N);
  PACI_CUDA_CHECK_LAUNCH();
}

#define PACI_ROWS_INSTANTIATE(X)                                                                   \
  template void encoder_forward<X>(const OpContext&, X*, const std::int32_t*, const X*, const X*,  \
                                   std::size_t, std::size_t, std::size_t);                         \
  template void encoder_backward<X>(const OpContext&, float*, float*, const X*,                    \
                                    const TokenGroups&, std::size_t, std::size_t, std::size_t);    \
  template void layernorm_forward<X>(const OpContext&, X*, float*, float*, const X*, const X*,     \
                                     const X*, std::size_t, std::size_t);                          \
  template void layernorm_backward<X>(const OpContext&, X*, float*, float*, const X*, const X*,    \
                                      const X*, const float*, const float*, std::size_t,           \
                                      std::size_t);                                                \
  template void layernorm_backward_input<X>(const OpContext&, X*, const X*, const X*, const X*,    \
                                            const float*, const float*, std::size_t, std::size_t); \
  template void layernorm_backward_weight<X>(const OpContext&, float*, float*, const X*, const X*, \
                                             const float*, const float*, std::size_t,              \
                                             std::size_t);                                         \
  template void gelu_forward<X>(const OpContext&, X*, const X*, std::size_t);                      \
  template void gelu_backward<X>(const OpContext&, X*, const X*, const X*, std::size_t);

PACI_ROWS_INSTANTIATE(float)
PACI_ROWS_INSTANTIATE(bf16)

}  // namespace paci::cuda
