// cuBLAS and cuBLASLt calls behind gemm.hpp: the row-major to column-major swap, dimension checks,
// and the cuBLASLt descriptors (owned by unique_ptr, so a throwing check leaks nothing).
#include "cuda/gemm.hpp"

#include <climits>
#include <cstdint>
#include <memory>
#include <string>

#include "cuda/check.hpp"

namespace paci::cuda {
namespace {

int to_int(std::size_t n, const char* what) {
  PACI_CUDA_REQUIRE(n <= static_cast<std::size_t>(INT_MAX),
                    std::string(what) + " " + std::to_string(n) + " exceeds int");
  return static_cast<int>(n);
}

cublasOperation_t to_cublas(Transpose t) {
  return t == Transpose::yes ? CUBLAS_OP_T : CUBLAS_OP_N;
}

bool aligned16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

std::size_t type_bytes(cudaDataType_t type) {
  return type == CUDA_R_32F ? 4 : 2;
}

struct DescDeleter {
  void operator()(cublasLtMatmulDescOpaque_t* d) const { cublasLtMatmulDescDestroy(d); }
  void operator()(cublasLtMatrixLayoutOpaque_t* d) const { cublasLtMatrixLayoutDestroy(d); }
  void operator()(cublasLtMatmulPreferenceOpaque_t* d) const { cublasLtMatmulPreferenceDestroy(d); }
};
using MatmulDesc = std::unique_ptr<cublasLtMatmulDescOpaque_t, DescDeleter>;
using MatrixLayout = std::unique_ptr<cublasLtMatrixLayoutOpaque_t, DescDeleter>;
using Preference = std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, DescDeleter>;

// A column-major layout of rows × cols with leading dimension ld.
MatrixLayout layout(cudaDataType_t type, std::size_t rows, std::size_t cols, std::size_t ld) {
  cublasLtMatrixLayout_t raw = nullptr;
  PACI_CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&raw, type, rows, cols, static_cast<std::int64_t>(ld)));
  return MatrixLayout(raw);
}

template <typename V>
void set(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute, const V& value) {
  PACI_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(value)));
}
template <typename V>
void set(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attribute,
         const V& value) {
  PACI_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attribute, &value, sizeof(value)));
}

}  // namespace

void gemm(const OpContext& ctx, Transpose trans_a, Transpose trans_b, std::size_t M, std::size_t N,
          std::size_t K, float alpha, const GemmOperand& A, const GemmOperand& B, float beta,
          const GemmOutput& C, std::size_t batch) {
  if (M == 0 || N == 0 || batch == 0) return;
  const int m = to_int(M, "GEMM M"), n = to_int(N, "GEMM N"), k = to_int(K, "GEMM K");
  const int lda = to_int(A.ld, "lda"), ldb = to_int(B.ld, "ldb"), ldc = to_int(C.ld, "ldc");
  // Row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: B goes first, each operand
  // keeping its own transpose flag (a row-major matrix read column-major is its transpose).
  if (batch == 1) {
    PACI_CUBLAS_CHECK(cublasGemmEx(ctx.blas, to_cublas(trans_b), to_cublas(trans_a), n, m, k,
                                   &alpha, B.data, B.type, ldb, A.data, A.type, lda, &beta, C.data,
                                   C.type, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return;
  }
  PACI_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      ctx.blas, to_cublas(trans_b), to_cublas(trans_a), n, m, k, &alpha, B.data, B.type, ldb,
      B.stride, A.data, A.type, lda, A.stride, &beta, C.data, C.type, ldc, C.stride,
      to_int(batch, "GEMM batch"), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

bool lt_linear_forward(const OpContext& ctx, void* out, const void* inp, const void* weight,
                       const void* bias, const void* residual, cudaDataType_t type, std::size_t R,
                       std::size_t C, std::size_t OC, std::size_t ld) {
  if (ctx.lt == nullptr) return false;
  const std::size_t bytes = type_bytes(type);
  if (!aligned16(out) || !aligned16(inp) || !aligned16(weight) ||
      (bias != nullptr && !aligned16(bias)) || (residual != nullptr && !aligned16(residual)) ||
      (C * bytes) % 16 != 0 || (ld * bytes) % 16 != 0) {
    return false;
  }
  to_int(R, "Lt rows");
  to_int(C, "Lt C");
  to_int(OC, "Lt OC");
  to_int(ld, "Lt ld");
  // Column-major: D(OC×R) = op(A)·B with A = weight stored C×OC (transposed), B = inp stored C×R.
  cublasLtMatmulDesc_t raw_desc = nullptr;
  PACI_CUBLAS_CHECK(cublasLtMatmulDescCreate(&raw_desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const MatmulDesc desc(raw_desc);
  set(desc.get(), CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
  set(desc.get(), CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
  if (bias != nullptr) {
    set(desc.get(), CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
    set(desc.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
    set(desc.get(), CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, type);
  }
  const MatrixLayout a = layout(type, C, OC, C);
  const MatrixLayout b = layout(type, C, R, C);
  const MatrixLayout d = layout(type, OC, R, ld);  // C and D share it
  cublasLtMatmulPreference_t raw_pref = nullptr;
  PACI_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&raw_pref));
  const Preference pref(raw_pref);
  set(pref.get(), CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
      static_cast<std::uint64_t>(ctx.lt_workspace_bytes));
  const std::uint32_t alignment = 16;
  set(pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignment);
  set(pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignment);
  set(pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignment);
  set(pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignment);
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      ctx.lt, desc.get(), a.get(), b.get(), d.get(), d.get(), pref.get(), 1, &heuristic, &found);
  if (status != CUBLAS_STATUS_SUCCESS || found == 0) return false;
  const float alpha = 1.0f, beta = residual != nullptr ? 1.0f : 0.0f;
  const void* c_operand = residual != nullptr ? residual : out;
  PACI_CUBLAS_CHECK(cublasLtMatmul(ctx.lt, desc.get(), &alpha, weight, a.get(), inp, b.get(), &beta,
                                   c_operand, d.get(), out, d.get(), &heuristic.algo,
                                   ctx.lt_workspace, ctx.lt_workspace_bytes, ctx.stream));
  return true;
}

}  // namespace paci::cuda
