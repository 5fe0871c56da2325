// OpenBLAS wrapper: thread setter, chunked gemm, single-threaded gemm, GEMM timer. Chunks are a
// function of M alone (chunk_rows), which is what keeps results independent of the thread count.
#include "model/blas.hpp"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <vector>

#include "model/check.hpp"

namespace paci::model {
namespace {

CBLAS_TRANSPOSE to_cblas(Transpose t) {
  return t == Transpose::yes ? CblasTrans : CblasNoTrans;
}

int to_int(std::size_t n) {
  PACI_MODEL_CHECK(n <= static_cast<std::size_t>(INT_MAX), "GEMM dimension {} exceeds int", n);
  return static_cast<int>(n);
}

// Rows per chunk, a function of the shape only: large enough to keep sgemm efficient (its
// packing of B is repeated per chunk), small enough to give two or more threads work.
std::size_t chunk_rows(std::size_t M) {
  if (M <= 64) return M;
  return M < 1024 ? 64 : 256;
}

}  // namespace

void set_blas_threads(std::size_t threads) {
  PACI_MODEL_CHECK(threads > 0, "OpenBLAS needs at least one thread");
  openblas_set_num_threads(to_int(threads));
}

std::size_t blas_threads() {
  return static_cast<std::size_t>(openblas_get_num_threads());
}

void gemm_serial(Transpose trans_a, Transpose trans_b, std::size_t M, std::size_t N, std::size_t K,
                 float alpha, const float* A, std::size_t lda, const float* B, std::size_t ldb,
                 float beta, float* C, std::size_t ldc) {
  if (M == 0 || N == 0) return;
  cblas_sgemm(CblasRowMajor, to_cblas(trans_a), to_cblas(trans_b), to_int(M), to_int(N), to_int(K),
              alpha, A, to_int(lda), B, to_int(ldb), beta, C, to_int(ldc));
}

namespace {

// Runs run_chunk(m0, rows) for the fixed row chunks of M on up to ctx.threads threads.
template <typename RunChunk>
void for_each_chunk(const OpContext& ctx, std::size_t M, const RunChunk& run_chunk) {
  const std::size_t rows = chunk_rows(M);
  const std::size_t chunks = M == 0 ? 0 : (M + rows - 1) / rows;
  auto one = [&](std::size_t chunk) {
    const std::size_t m0 = chunk * rows;
    run_chunk(m0, std::min(rows, M - m0));
  };
  const int threads = static_cast<int>(std::min(ctx.threads, chunks));
  if (threads <= 1) {
    for (std::size_t c = 0; c < chunks; ++c) one(c);
    return;
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::size_t c = 0; c < chunks; ++c) one(c);
}

}  // namespace

void gemm(const OpContext& ctx, Transpose trans_a, Transpose trans_b, std::size_t M, std::size_t N,
          std::size_t K, float alpha, const float* A, std::size_t lda, const float* B,
          std::size_t ldb, float beta, float* C, std::size_t ldc) {
  GemmTimer timer(ctx, 2.0 * static_cast<double>(M) * static_cast<double>(N) * K);
  // Row m of op(A) starts at A + m·lda (not transposed) or at column m, A + m (transposed).
  const std::size_t a_step = trans_a == Transpose::yes ? 1 : lda;
  for_each_chunk(ctx, M, [&](std::size_t m0, std::size_t mc) {
    gemm_serial(trans_a, trans_b, mc, N, K, alpha, A + m0 * a_step, lda, B, ldb, beta, C + m0 * ldc,
                ldc);
  });
}

void gemm_accumulate(const OpContext& ctx, Transpose trans_a, Transpose trans_b, std::size_t M,
                     std::size_t N, std::size_t K, float alpha, const float* A, std::size_t lda,
                     const float* B, std::size_t ldb, float* C, std::size_t ldc) {
  GemmTimer timer(ctx, 2.0 * static_cast<double>(M) * static_cast<double>(N) * K);
  const std::size_t a_step = trans_a == Transpose::yes ? 1 : lda;
  for_each_chunk(ctx, M, [&](std::size_t m0, std::size_t mc) {
    // One buffer per thread, grown to the largest chunk once: no allocation in later steps.
    thread_local std::vector<float> scratch;
    if (scratch.size() < mc * N) scratch.resize(mc * N);
    gemm_serial(trans_a, trans_b, mc, N, K, alpha, A + m0 * a_step, lda, B, ldb, 0.0f,
                scratch.data(), N);
    for (std::size_t r = 0; r < mc; ++r) {
      float* c = C + (m0 + r) * ldc;
      const float* s = scratch.data() + r * N;
      for (std::size_t n = 0; n < N; ++n) c[n] += s[n];
    }
  });
}

GemmTimer::GemmTimer(const OpContext& ctx, double flops, std::size_t calls)
    : stats_(ctx.gemm_stats), flops_(flops), calls_(calls) {
  if (stats_ != nullptr) start_ = std::chrono::steady_clock::now();
}

GemmTimer::~GemmTimer() {
  if (stats_ == nullptr) return;
  const auto end = std::chrono::steady_clock::now();
  stats_->seconds += std::chrono::duration<double>(end - start_).count();
  stats_->flops += flops_;
  stats_->calls += calls_;
}

}  // namespace paci::model
