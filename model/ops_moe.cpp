// The mixture-of-experts layers (config.hpp, MoeConfig): the router's top-k choice with capacity
// and its load-balancing loss, the router's backward, and SwiGLU. Routing runs in one thread in
// token order (its cost is R·E, small beside the experts' GEMMs); the row-wise loops run rows in
// parallel, each row by one thread in one order, so nothing depends on the thread count.
#include <algorithm>
#include <cmath>

#include "model/lanes.hpp"
#include "model/ops.hpp"
#include "model/vecmath.hpp"

namespace paci::model {

float moe_route(const MoeRouting& r, const float* logits, std::size_t R, std::size_t E,
                std::size_t K, std::size_t capacity, float aux_loss_coef) {
  // (R1) probs = softmax(logits) per token.
  for (std::size_t t = 0; t < R; ++t) {
    const float* z = logits + t * E;
    float* p = r.probs + t * E;
    const float zmax = lanes::max(z, E);
    for (std::size_t e = 0; e < E; ++e) p[e] = fast_exp(z[e] - zmax);
    const float inv = 1.0f / lanes::sum(p, E);
    for (std::size_t e = 0; e < E; ++e) p[e] *= inv;
  }
  // (R2) each token's K most probable experts, the lower index first on a tie, and their gates:
  // the chosen probabilities over their sum.
  std::fill(r.chosen, r.chosen + E, 0);
  for (std::size_t t = 0; t < R; ++t) {
    const float* p = r.probs + t * E;
    std::int32_t* choice = r.choice + t * K;
    for (std::size_t j = 0; j < K; ++j) {
      std::size_t best = E;
      for (std::size_t e = 0; e < E; ++e) {
        if (std::find(choice, choice + j, static_cast<std::int32_t>(e)) != choice + j) continue;
        if (best == E || p[e] > p[best]) best = e;
      }
      choice[j] = static_cast<std::int32_t>(best);
      ++r.chosen[best];
    }
    float sum = 0;
    for (std::size_t j = 0; j < K; ++j) sum += p[choice[j]];
    for (std::size_t j = 0; j < K; ++j) r.gates[t * K + j] = p[choice[j]] / sum;
  }
  // (R3) capacity: first choices of every token first, then second ones, each in token order.
  // Kept assignments are numbered expert by expert, in token order within an expert.
  std::fill(r.first_row, r.first_row + E + 1, 0);
  for (std::size_t j = 0; j < K; ++j)
    for (std::size_t t = 0; t < R; ++t) {
      const std::int32_t e = r.choice[t * K + j];
      const bool kept = static_cast<std::size_t>(r.first_row[e + 1]) < capacity;
      r.row[t * K + j] = kept ? 0 : -1;
      if (kept) ++r.first_row[e + 1];
    }
  for (std::size_t e = 0; e < E; ++e) r.first_row[e + 1] += r.first_row[e];
  std::vector<std::int32_t>& next = *r.scratch;
  next.assign(r.first_row, r.first_row + E);
  for (std::size_t i = 0; i < R * K; ++i)
    if (r.row[i] == 0) r.row[i] = next[static_cast<std::size_t>(r.choice[i])]++;
  // (R4) aux = α·E·Σ_e f_e·P_e, f_e = chosen_e / (R·K), P_e = Σ_t probs(t,e) / R.
  double aux = 0;
  for (std::size_t e = 0; e < E; ++e) {
    double P = 0;
    for (std::size_t t = 0; t < R; ++t) P += r.probs[t * E + e];
    aux +=
        static_cast<double>(r.chosen[e]) / static_cast<double>(R * K) * P / static_cast<double>(R);
  }
  return static_cast<float>(aux_loss_coef * static_cast<double>(E) * aux);
}

// Differentiates (R2) and (R4) into d(probs), then (R1) into dlogits. The gates g_j = p_j / S
// give dp_j = (dg_j − Σ_i g_i·dg_i) / S; the loss gives every dp_e the same α·E·f_e / R, times
// aux_scale (the micro-batch's loss scale); f_e is held constant (Megatron-LM's and Switch's).
void moe_route_backward(const OpContext& ctx, float* dlogits, const float* probs,
                        const float* gates, const std::int32_t* choices, const std::int32_t* chosen,
                        const float* dgates, std::size_t R, std::size_t E, std::size_t K,
                        float aux_loss_coef, float aux_scale) {
  const float aux_per_prob = aux_loss_coef * static_cast<float>(E) * aux_scale /
                             (static_cast<float>(R) * static_cast<float>(R * K));
#pragma omp parallel for num_threads(team(ctx)) if (parallel : ctx.threads > 1) schedule(static)
  for (std::size_t t = 0; t < R; ++t) {
    const float* p = probs + t * E;
    const std::int32_t* choice = choices + t * K;
    const float* g = gates + t * K;
    const float* dg = dgates + t * K;
    float* dz = dlogits + t * E;  // holds d(probs) first
    for (std::size_t e = 0; e < E; ++e) dz[e] = aux_per_prob * static_cast<float>(chosen[e]);
    float sum = 0, gdg = 0;
    for (std::size_t j = 0; j < K; ++j) {
      sum += p[choice[j]];
      gdg += g[j] * dg[j];
    }
    for (std::size_t j = 0; j < K; ++j) dz[choice[j]] += (dg[j] - gdg) / sum;
    const float pdp = lanes::dot(p, dz, E);
    for (std::size_t e = 0; e < E; ++e) dz[e] = p[e] * (dz[e] - pdp);
  }
}

// (S1) h = silu(a)·b, silu(a) = a·σ(a).
void swiglu_forward(const OpContext& ctx, float* h, const float* a, const float* b, std::size_t N) {
#pragma omp parallel for simd num_threads(team(ctx)) if (parallel \
                                                         : ctx.threads > 1) schedule(static)
  for (std::size_t i = 0; i < N; ++i) {
    const float s = 1.0f / (1.0f + fast_exp(-a[i]));
    h[i] = a[i] * s * b[i];
  }
}

// Differentiates (S1): da = dh·b·σ(a)·(1 + a·(1 − σ(a))), db = dh·silu(a).
void swiglu_backward(const OpContext& ctx, float* da, float* db, const float* dh, const float* a,
                     const float* b, std::size_t N) {
#pragma omp parallel for simd num_threads(team(ctx)) if (parallel \
                                                         : ctx.threads > 1) schedule(static)
  for (std::size_t i = 0; i < N; ++i) {
    const float s = 1.0f / (1.0f + fast_exp(-a[i]));
    const float d = dh[i];
    da[i] = d * b[i] * (s * (1.0f + a[i] * (1.0f - s)));
    db[i] = d * (a[i] * s);
  }
}

}  // namespace paci::model
