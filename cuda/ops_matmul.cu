// The linear layer on the GPU: forward through cuBLASLt with the bias epilogue and the residual as
// the C operand (or, where Lt declines, a bias/residual kernel and a cuBLAS GEMM with beta = 1, as
// on the CPU), backward through cuBLAS for the input and the weight, fixed-order sums for the bias.
#include <string>

#include "cuda/check.hpp"
#include "cuda/column_sums.cuh"
#include "cuda/gemm.hpp"
#include "cuda/kernels.cuh"
#include "cuda/ops.hpp"

namespace paci::cuda {
namespace {

using kernels::from_float;
using kernels::grid_for;
using kernels::to_float;

constexpr unsigned kThreads = 256;

// out = residual + bias, residual, or bias (broadcast over rows): the GEMM then adds with beta 1.
// Rows of out and residual are ld apart; the columns [OC, ld) are left alone.
template <typename floatX>
__global__ void bias_residual_kernel(floatX* out, const floatX* bias, const floatX* residual,
                                     std::size_t R, std::size_t OC, std::size_t ld) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < R * OC;
       i += stride) {
    const std::size_t at = i / OC * ld + i % OC;
    if (residual != nullptr && bias != nullptr) {
      out[at] = from_float<floatX>(to_float(residual[at]) + to_float(bias[i % OC]));
    } else if (residual != nullptr) {
      out[at] = residual[at];
    } else {
      out[at] = bias[i % OC];
    }
  }
}

// The bias term of row r: dbias += dout.
template <typename floatX>
struct BiasTerms {
  const floatX* dout;
  std::size_t ld;  // dout's row stride
  __device__ void operator()(std::size_t r, std::size_t c, float* s) const {
    s[0] += to_float(dout[r * ld + c]);
  }
};

}  // namespace

namespace {

// A row stride of 0 means dense rows (OC).
std::size_t stride_or(std::size_t ld, std::size_t OC) {
  if (ld == 0) return OC;
  PACI_CUDA_REQUIRE(
      ld >= OC, "row stride " + std::to_string(ld) + " below " + std::to_string(OC) + " columns");
  return ld;
}

}  // namespace

template <typename floatX>
void matmul_forward(const OpContext& ctx, floatX* out, const floatX* inp, const floatX* weight,
                    const floatX* bias, const floatX* residual, std::size_t R, std::size_t C,
                    std::size_t OC, std::size_t ld) {
  if (R == 0 || OC == 0) return;
  ld = stride_or(ld, OC);
  const cudaDataType_t type = data_type<floatX>();
  if (ctx.use_lt && lt_linear_forward(ctx, out, inp, weight, bias, residual, type, R, C, OC, ld)) {
    return;  // (M1) in one call
  }
  float beta = 0.0f;
  if (bias != nullptr || residual != nullptr) {
    beta = 1.0f;
    bias_residual_kernel<<<grid_for(R * OC, kThreads), kThreads, 0, ctx.stream>>>(
        out, bias, residual, R, OC, ld);
    PACI_CUDA_CHECK_LAUNCH();
  }
  // (M1) out(R,OC) += inp(R,C)·weight(OC,C)ᵀ
  gemm(ctx, Transpose::no, Transpose::yes, R, OC, C, 1.0f, {inp, type, C}, {weight, type, C}, beta,
       {out, type, ld});
}

// Differentiates (M1), input half: dinp = dout·weight.
template <typename floatX>
void matmul_backward_input(const OpContext& ctx, floatX* dinp, const floatX* dout,
                           const floatX* weight, std::size_t R, std::size_t C, std::size_t OC,
                           std::size_t ld) {
  if (R == 0) return;
  ld = stride_or(ld, OC);
  const cudaDataType_t type = data_type<floatX>();
  gemm(ctx, Transpose::no, Transpose::no, R, C, OC, 1.0f, {dout, type, ld}, {weight, type, C}, 0.0f,
       {dinp, type, C});
}

// Differentiates (M1), weight half: dweight += doutᵀ·inp, dbias += Σ_r dout.
template <typename floatX>
void matmul_backward_weight(const OpContext& ctx, float* dweight, float* dbias, const floatX* dout,
                            const floatX* inp, std::size_t R, std::size_t C, std::size_t OC,
                            std::size_t ld) {
  if (R == 0) return;
  ld = stride_or(ld, OC);
  const cudaDataType_t type = data_type<floatX>();
  gemm(ctx, Transpose::yes, Transpose::no, OC, C, R, 1.0f, {dout, type, ld}, {inp, type, C}, 1.0f,
       {dweight, CUDA_R_32F, C});
  if (dbias != nullptr) kernels::column_sums<1>(ctx, BiasTerms<floatX>{dout, ld}, R, OC, dbias);
}

template <typename floatX>
void matmul_backward(const OpContext& ctx, floatX* dinp, float* dweight, float* dbias,
                     const floatX* dout, const floatX* inp, const floatX* weight, std::size_t R,
                     std::size_t C, std::size_t OC, std::size_t ld) {
  if (dinp != nullptr) matmul_backward_input(ctx, dinp, dout, weight, R, C, OC, ld);
  matmul_backward_weight(ctx, dweight, dbias, dout, inp, R, C, OC, ld);
}

#define PACI_MATMUL_INSTANTIATE(X)                                                                \
  template void matmul_forward<X>(const OpContext&, X*, const X*, const X*, const X*, const X*,   \
                                  std::size_t, std::size_t, std::size_t, std::size_t);            \
  template void matmul_backward<X>(const OpContext&, X*, float*, float*, const X*, const X*,      \
                                   const X*, std::size_t, std::size_t, std::size_t, std::size_t); \
  template void matmul_backward_input<X>(const OpContext&, X*, const X*, const X*, std::size_t,   \
                                         std::size_t, std::size_t, std::size_t);                  \
  template void matmul_backward_weight<X>(const OpContext&, float*, float*, const X*, const X*,   \
                                          std::size_t, std::size_t, std::size_t, std::size_t);

PACI_MATMUL_INSTANTIATE(float)
PACI_MATMUL_INSTANTIATE(bf16)

}  // namespace paci::cuda
