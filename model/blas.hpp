// The one door to OpenBLAS: row-major sgemm split into fixed row chunks that OpenMP threads run
// with single-threaded OpenBLAS. The chunking depends on the shape only, never on the thread count,
// so every GEMM result is bitwise independent of how many threads ran it.
#pragma once

#include <chrono>
#include <cstddef>

namespace paci::model {

// Accumulated by the ops when OpContext::gemm_stats is set (the benchmark's GEMM share).
struct GemmStats {
  double seconds = 0;  // wall time of the GEMM phases, seen by the calling thread
  double flops = 0;    // 2·M·N·K per product
  std::size_t calls = 0;
};

// What every op needs to know: how many OpenMP threads to use for its loops and GEMM chunks, and
// where to add GEMM timings (nullptr: not timed). One context per stage; never shared between
// threads that run at the same time.
struct OpContext {
  std::size_t threads = 1;
  GemmStats* gemm_stats = nullptr;
};
// The OpenMP team size of an op's parallel loops (num_threads clauses take an int).
inline int team(const OpContext& ctx) {
  return static_cast<int>(ctx.threads);
}

// Process-wide OpenBLAS thread count (openblas_set_num_threads is global). paci's GEMMs need 1:
// they parallelise themselves, so that each stage can have its own thread count and results do
// not depend on it. Constructing a Stage sets 1 if it is not already. The only global we touch.
void set_blas_threads(std::size_t threads);
std::size_t blas_threads();

enum class Transpose { no, yes };

// C(M×N) = alpha·op(A)·op(B) + beta·C, row-major, op(A) is M×K and op(B) is K×N.
// Splits the M rows into fixed chunks and runs them on ctx.threads threads; times itself.
void gemm(const OpContext& ctx, Transpose trans_a, Transpose trans_b, std::size_t M, std::size_t N,
          std::size_t K, float alpha, const float* A, std::size_t lda, const float* B,
          std::size_t ldb, float beta, float* C, std::size_t ldc);

// C(M×N) += alpha·op(A)·op(B), with the product of each row chunk computed into scratch first and
// then added to C once. So C gains exactly one rounded addition per element per call, whatever
// the BLAS kernel does inside (a kernel may add into C several times when it blocks K): two calls
// with the same operands on a zero C give exactly twice the first. Parameter gradients accumulate
// over micro-batches through this, as PyTorch accumulates `.grad`.
void gemm_accumulate(const OpContext& ctx, Transpose trans_a, Transpose trans_b, std::size_t M,
                     std::size_t N, std::size_t K, float alpha, const float* A, std::size_t lda,
                     const float* B, std::size_t ldb, float* C, std::size_t ldc);

// The same product as one single-threaded OpenBLAS call in the calling thread, untimed (for loops
// that are already parallel, such as attention's per-(sequence, head) products).
void gemm_serial(Transpose trans_a, Transpose trans_b, std::size_t M, std::size_t N, std::size_t K,
                 float alpha, const float* A, std::size_t lda, const float* B, std::size_t ldb,
                 float beta, float* C, std::size_t ldc);

// Adds the wall time of its lifetime and the given FLOPs to ctx.gemm_stats, if set.
class GemmTimer {
 public:
  GemmTimer(const OpContext& ctx, double flops, std::size_t calls = 1);
  ~GemmTimer();
  GemmTimer(const GemmTimer&) = delete;
  GemmTimer& operator=(const GemmTimer&) = delete;

 private:
  GemmStats* stats_;
  double flops_;
  std::size_t calls_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace paci::model
