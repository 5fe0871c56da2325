// Causal multi-head attention. Per (sequence, head) the products run as single-threaded sgemm on
// query blocks of kBlock rows, each reading only the keys it can see, so about 5/8 of the full
// T×T work at T = 128; (sequence, head) pairs run in parallel. Same bits for any thread count.
#include <algorithm>
#include <chrono>
#include <cmath>

#include "model/lanes.hpp"
#include "model/ops.hpp"
#include "model/vecmath.hpp"

namespace paci::model {
namespace {

inline constexpr std::size_t kBlock = 32;  // query (and key) rows per causal block
using Clock = std::chrono::steady_clock;

// Σ over query blocks of rows·visible keys: every product below does 2·HS times this many FLOPs.
double block_entries(std::size_t T) {
  double entries = 0;
  for (std::size_t q0 = 0; q0 < T; q0 += kBlock) {
    const std::size_t q1 = std::min(T, q0 + kBlock);
    entries += static_cast<double>((q1 - q0) * q1);
  }
  return entries;
}

// Adds the GEMM wall time of a parallel loop: per-thread GEMM seconds summed, over the threads.
void add_gemm_time(const OpContext& ctx, double thread_seconds, double flops, std::size_t calls) {
  if (ctx.gemm_stats == nullptr) return;
  const double threads = static_cast<double>(std::max<std::size_t>(ctx.threads, 1));
  ctx.gemm_stats->seconds += thread_seconds / threads;
  ctx.gemm_stats->flops += flops;
  ctx.gemm_stats->calls += calls;
}

double since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

void attention_forward(const OpContext& ctx, float* out, float* att, const float* qkv,
                       std::size_t B, std::size_t T, std::size_t C, std::size_t NH) {
  const std::size_t HS = C / NH, C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
  const bool timed = ctx.gemm_stats != nullptr;
  double gemm_seconds = 0;
#pragma omp parallel for num_threads(team(ctx)) if (parallel : ctx.threads > 1) schedule(static) \
    reduction(+ : gemm_seconds)
  for (std::size_t bh = 0; bh < B * NH; ++bh) {
    const std::size_t b = bh / NH, h = bh % NH;
    const float* Q = qkv + b * T * C3 + h * HS;  // (T, HS), row stride 3C
    const float* K = Q + C;
    const float* V = Q + 2 * C;
    float* A = att + bh * T * T;  // (T, T)
    Clock::time_point start;
    if (timed) start = Clock::now();
    for (std::size_t q0 = 0; q0 < T; q0 += kBlock) {  // (A1) S = scale·Q·Kᵀ, visible keys only
      const std::size_t q1 = std::min(T, q0 + kBlock);
      gemm_serial(Transpose::no, Transpose::yes, q1 - q0, q1, HS, scale, Q + q0 * C3, C3, K, C3,
                  0.0f, A + q0 * T, T);
    }
    if (timed) gemm_seconds += since(start);
    for (std::size_t t = 0; t < T; ++t) {  // (A2) A = causal softmax(S), zeros above the diagonal
      float* row = A + t * T;
      const float smax = lanes::max(row, t + 1);
#pragma omp simd
      for (std::size_t j = 0; j <= t; ++j) row[j] = fast_exp(row[j] - smax);
      const float inv = 1.0f / lanes::sum(row, t + 1);
      for (std::size_t j = 0; j <= t; ++j) row[j] *= inv;
      for (std::size_t j = t + 1; j < T; ++j) row[j] = 0.0f;
    }
    if (timed) start = Clock::now();
    for (std::size_t q0 = 0; q0 < T; q0 += kBlock) {  // (A3) out = A·V
      const std::size_t q1 = std::min(T, q0 + kBlock);
      gemm_serial(Transpose::no, Transpose::no, q1 - q0, HS, q1, 1.0f, A + q0 * T, T, V, C3, 0.0f,
                  out + (b * T + q0) * C + h * HS, C);
    }
    if (timed) gemm_seconds += since(start);
  }
  const double flops = 2 * 2.0 * static_cast<double>(HS * B * NH) * block_entries(T);
  add_gemm_time(ctx, gemm_seconds, flops, 2 * B * NH * ((T + kBlock - 1) / kBlock));
}

void attention_backward(const OpContext& ctx, float* dqkv, float* datt, const float* dout,
                        const float* qkv, const float* att, std::size_t B, std::size_t T,
                        std::size_t C, std::size_t NH) {
  const std::size_t HS = C / NH, C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
  const bool timed = ctx.gemm_stats != nullptr;
  double gemm_seconds = 0;
#pragma omp parallel for num_threads(team(ctx)) if (parallel : ctx.threads > 1) schedule(static) \
    reduction(+ : gemm_seconds)
  for (std::size_t bh = 0; bh < B * NH; ++bh) {
    const std::size_t b = bh / NH, h = bh % NH;
    const float* Q = qkv + b * T * C3 + h * HS;
    const float* K = Q + C;
    const float* V = Q + 2 * C;
    const float* A = att + bh * T * T;
    const float* dO = dout + b * T * C + h * HS;  // (T, HS), row stride C
    float* dQ = dqkv + b * T * C3 + h * HS;
    float* dK = dQ + C;
    float* dV = dQ + 2 * C;
    float* dA = datt + bh * T * T;
    Clock::time_point start;
    if (timed) start = Clock::now();
    for (std::size_t q0 = 0; q0 < T; q0 += kBlock) {
      const std::size_t q1 = std::min(T, q0 + kBlock), k0 = q0, kn = q1 - q0;
      // Differentiates (A3) for A: dA = dO·Vᵀ (visible keys).
      gemm_serial(Transpose::no, Transpose::yes, q1 - q0, q1, HS, 1.0f, dO + q0 * C, C, V, C3, 0.0f,
                  dA + q0 * T, T);
      // Differentiates (A3) for V: dV[k0:k1] = A[k0:T, k0:k1]ᵀ·dO[k0:T] (queries that see them).
      gemm_serial(Transpose::yes, Transpose::no, kn, HS, T - k0, 1.0f, A + k0 * T + k0, T,
                  dO + k0 * C, C, 0.0f, dV + k0 * C3, C3);
    }
    if (timed) gemm_seconds += since(start);
    // Differentiates (A2): dS = A ⊙ (dA − Σ_j A·dA) on and below the diagonal, 0 above.
    for (std::size_t t = 0; t < T; ++t) {
      const float* a = A + t * T;
      float* g = dA + t * T;
      const float dot = lanes::dot(a, g, t + 1);
      for (std::size_t j = 0; j <= t; ++j) g[j] = a[j] * (g[j] - dot);
      for (std::size_t j = t + 1; j < T; ++j) g[j] = 0.0f;
    }
    if (timed) start = Clock::now();
    for (std::size_t q0 = 0; q0 < T; q0 += kBlock) {
      const std::size_t q1 = std::min(T, q0 + kBlock), k0 = q0, kn = q1 - q0;
      // Differentiates (A1) for Q: dQ = scale·dS·K.
      gemm_serial(Transpose::no, Transpose::no, q1 - q0, HS, q1, scale, dA + q0 * T, T, K, C3, 0.0f,
                  dQ + q0 * C3, C3);
      // Differentiates (A1) for K: dK[k0:k1] = scale·dS[k0:T, k0:k1]ᵀ·Q[k0:T].
      gemm_serial(Transpose::yes, Transpose::no, kn, HS, T - k0, scale, dA + k0 * T + k0, T,
                  Q + k0 * C3, C3, 0.0f, dK + k0 * C3, C3);
    }
    if (timed) gemm_seconds += since(start);
  }
  const double flops = 4 * 2.0 * static_cast<double>(HS * B * NH) * block_entries(T);
  add_gemm_time(ctx, gemm_seconds, flops, 4 * B * NH * ((T + kBlock - 1) / kBlock));
}

}  // namespace paci::model
