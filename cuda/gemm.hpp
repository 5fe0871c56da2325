// Row-major GEMMs on the GPU, the way model/blas.hpp states them on the CPU: cuBLAS (column-major)
// is called with the operands swapped. Always fp32 compute (no TF32); operands fp32 or bf16, and
// a bf16 product may accumulate into fp32 (weight gradients). Plus the linear layer's cuBLASLt
// path.
#pragma once

#include <library_types.h>

#include <cstddef>

#include "cuda/bf16.hpp"
#include "cuda/ops.hpp"
#include "model/blas.hpp"

namespace paci::cuda {

using model::Transpose;

template <typename T>
constexpr cudaDataType_t data_type();
template <>
constexpr cudaDataType_t data_type<float>() {
  return CUDA_R_32F;
}
template <>
constexpr cudaDataType_t data_type<bf16>() {
  return CUDA_R_16BF;
}

// A row-major matrix on the device: element (i, j) at data[i·ld + j]; the b-th of a batch starts
// `stride` elements after the (b−1)-th.
struct GemmOperand {
  const void* data = nullptr;
  cudaDataType_t type = CUDA_R_32F;
  std::size_t ld = 0;
  long long stride = 0;
};
struct GemmOutput {
  void* data = nullptr;
  cudaDataType_t type = CUDA_R_32F;
  std::size_t ld = 0;
  long long stride = 0;
};

// C(M×N) = alpha·op(A)·op(B) + beta·C for `batch` independent products (cublasGemmEx, or
// cublasGemmStridedBatchedEx when batch > 1). op(A) is M×K, op(B) is K×N.
void gemm(const OpContext& ctx, Transpose trans_a, Transpose trans_b, std::size_t M, std::size_t N,
          std::size_t K, float alpha, const GemmOperand& A, const GemmOperand& B, float beta,
          const GemmOutput& C, std::size_t batch = 1);

// out(R,OC) = inp(R,C)·weight(OC,C)ᵀ + bias(OC) [+ residual(R,OC)] as one cublasLtMatmul: the
// bias is the BIAS epilogue, the residual the C operand with beta = 1 (D = out). All of `type`.
// Rows of out and residual are ld ≥ OC elements apart. Returns false, having launched nothing,
// when a pointer or a row (C or ld elements) is not 16-byte aligned or cuBLASLt has no algorithm
// for the problem; the caller then takes the GEMM path.
bool lt_linear_forward(const OpContext& ctx, void* out, const void* inp, const void* weight,
                       const void* bias, const void* residual, cudaDataType_t type, std::size_t R,
                       std::size_t C, std::size_t OC, std::size_t ld);

}  // namespace paci::cuda
