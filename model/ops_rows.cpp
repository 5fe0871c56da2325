// Row-wise layers: encoder, LayerNorm, GELU and the fused softmax cross-entropy, each backward
// below its forward. Rows run in parallel; sums across rows (parameter gradients) run per channel
// block in row order, so no result depends on the thread count.
#include <algorithm>
#include <cmath>

#include "model/lanes.hpp"
#include "model/ops.hpp"
#include "model/vecmath.hpp"

namespace paci::model {
namespace {

inline constexpr std::size_t kChannelBlock = 16;  // channels per thread task in row-order sums

std::size_t channel_blocks(std::size_t C) {
  return (C + kChannelBlock - 1) / kChannelBlock;
}

}  // namespace

void encoder_forward(const OpContext& ctx, float* out, const std::int32_t* tokens, const float* wte,
                     const float* wpe, std::size_t B, std::size_t T, std::size_t C) {
#pragma omp parallel for num_threads(team(ctx)) if (parallel : ctx.threads > 1) schedule(static)
  for (std::size_t r = 0; r < B * T; ++r) {
    const float* token_row = wte + static_cast<std::size_t>(tokens[r]) * C;
    const float* position_row = wpe + (r % T) * C;
    float* o = out + r * C;
    for (std::size_t c = 0; c < C; ++c) o[c] = token_row[c] + position_row[c];  // (E1)
  }
}

// Differentiates (E1): both embeddings receive dout; a token seen twice sums, in row order.
void encoder_backward(const OpContext& ctx, float* dwte, float* dwpe, const float* dout,
                      const std::int32_t* tokens, std::size_t B, std::size_t T, std::size_t C) {
  const std::size_t R = B * T;
#pragma omp parallel for num_threads(team(ctx)) if (parallel : ctx.threads > 1) schedule(static)
  for (std::size_t block = 0; block < channel_blocks(C); ++block) {
    const std::size_t c0 = block * kChannelBlock, c1 = std::min(C, c0 + kChannelBlock);
    for (std::size_t r = 0; r < R; ++r) {
      float* w = dwte + static_cast<std::size_t>(tokens[r]) * C;
      const float* d = dout + r * C;
      for (std::size_t c = c0; c < c1; ++c) w[c] += d[c];
    }
  }
#pragma omp parallel for num_threads(team(ctx)) if (parallel : ctx.threads > 1) schedule(static)
  for (std::size_t t = 0; t < T; ++t) {
    float* w = dwpe + t * C;
    for (std::size_t c = 0; c < C; ++c) {
      float sum = 0.0f;  // this micro-batch's sum first, then one add
      for (std::size_t b = 0; b < B; ++b) sum += dout[(b * T + t) * C + c];
      w[c] += sum;
    }
  }
}

void layernorm_forward(const OpContext& ctx, float* out, float* mean, float* rstd, const float* inp,
                       const float* weight, const float* bias, std::size_t R, std::size_t C) {
  const float inv_c = 1.0f / static_cast<float>(C);
#pragma omp parallel for num_threads(team(ctx)) if (parallel : ctx.threads > 1) schedule(static)
  for (std::size_t r = 0; r < R; ++r) {
    const float* x = inp + r * C;
    const float m = lanes::sum(x, C) * inv_c;  // (N1)
    const float s = 1.0f / std::sqrt(lanes::squared_deviation(x, m, C) * inv_c + kLayerNormEps);
    float* o = out + r * C;
    for (std::size_t c = 0; c < C; ++c) o[c] = (x[c] - m) * s * weight[c] + bias[c];  // (N2)
    mean[r] = m;
    rstd[r] = s;
  }
}

// Differentiates (N2) through norm = (x − mean)·rstd and (N1)'s mean and variance:
//   dinp = rstd·(dnorm − mean(dnorm) − norm·mean(dnorm·norm)),  dnorm = dout·weight.
void layernorm_backward_input(const OpContext& ctx, float* dinp, const float* dout,
                              const float* inp, const float* weight, const float* mean,
                              const float* rstd, std::size_t R, std::size_t C) {
  const float inv_c = 1.0f / static_cast<float>(C);
#pragma omp parallel for num_threads(team(ctx)) if (parallel : ctx.threads > 1) schedule(static)
  for (std::size_t r = 0; r < R; ++r) {
    const float* x = inp + r * C;
    const float* d = dout + r * C;
    const float m = mean[r], s = rstd[r];
    float acc_d[lanes::kLanes] = {}, acc_dn[lanes::kLanes] = {};
    std::size_t c = 0;
    for (; c + lanes::kLanes <= C; c += lanes::kLanes) {
      for (std::size_t j = 0; j < lanes::kLanes; ++j) {
        const float dnorm = d[c + j] * weight[c + j];
        acc_d[j] += dnorm;
        acc_dn[j] += dnorm * ((x[c + j] - m) * s);
      }
    }
    float sum_d = lanes::combine(acc_d), sum_dn = lanes::combine(acc_dn);
    for (; c < C; ++c) {
      const float dnorm = d[c] * weight[c];
      sum_d += dnorm;
      sum_dn += dnorm * ((x[c] - m) * s);
    }
    const float mean_d = sum_d * inv_c, mean_dn = sum_dn * inv_c;
    float* g = dinp + r * C;
    for (std::size_t k = 0; k < C; ++k) {
      const float norm = (x[k] - m) * s;
      g[k] += (d[k] * weight[k] - mean_d - norm * mean_dn) * s;
    }
  }
}

void layernorm_backward_weight(const OpContext& ctx, float* dweight, float* dbias,
                               const float* dout, const float* inp, const float* mean,
                               const float* rstd, std::size_t R, std::size_t C) {
  // dweight = Σ_r dout·norm, dbias = Σ_r dout: each channel sums its rows in order.
#pragma omp parallel for num_threads(team(ctx)) if (parallel : ctx.threads > 1) schedule(static)
  for (std::size_t block = 0; block < channel_blocks(C); ++block) {
    const std::size_t c0 = block * kChannelBlock, c1 = std::min(C, c0 + kChannelBlock);
    float sum_w[kChannelBlock] = {}, sum_b[kChannelBlock] = {};
    for (std::size_t r = 0; r < R; ++r) {
      const float* x = inp + r * C;
      const float* d = dout + r * C;
      const float m = mean[r], s = rstd[r];
      for (std::size_t c = c0; c < c1; ++c) {
        sum_w[c - c0] += d[c] * ((x[c] - m) * s);
        sum_b[c - c0] += d[c];
      }
    }
    for (std::size_t c = c0; c < c1; ++c) {
      dweight[c] += sum_w[c - c0];
      dbias[c] += sum_b[c - c0];
    }
  }
}

void layernorm_backward(const OpContext& ctx, float* dinp, float* dweight, float* dbias,
                        const float* dout, const float* inp, const float* weight, const float* mean,
                        const float* rstd, std::size_t R, std::size_t C) {
  layernorm_backward_input(ctx, dinp, dout, inp, weight, mean, rstd, R, C);
  layernorm_backward_weight(ctx, dweight, dbias, dout, inp, mean, rstd, R, C);
}

namespace {
inline constexpr float kGeluScale = 0.7978845608028654f;  // √(2/π)
inline constexpr float kGeluCubic = 0.044715f;
}  // namespace

void gelu_forward(const OpContext& ctx, float* out, const float* inp, std::size_t N) {
#pragma omp parallel for simd num_threads(team(ctx)) if (parallel \
                                                         : ctx.threads > 1) schedule(static)
  for (std::size_t i = 0; i < N; ++i) {
    const float x = inp[i];
    const float u = kGeluScale * (x + kGeluCubic * x * x * x);
    out[i] = 0.5f * x * (1.0f + fast_tanh(u));  // (G1)
  }
}

// Differentiates (G1): 0.5·(1 + tanh u) + 0.5·x·(1 − tanh² u)·√(2/π)·(1 + 3·0.044715·x²).
void gelu_backward(const OpContext& ctx, float* dinp, const float* inp, const float* dout,
                   std::size_t N) {
#pragma omp parallel for simd num_threads(team(ctx)) if (parallel \
                                                         : ctx.threads > 1) schedule(static)
  for (std::size_t i = 0; i < N; ++i) {
    const float x = inp[i];
    const float u = kGeluScale * (x + kGeluCubic * x * x * x);
    const float th = fast_tanh(u);
    const float du = kGeluScale * (1.0f + 3.0f * kGeluCubic * x * x);
    const float local = 0.5f * (1.0f + th) + 0.5f * x * ((1.0f - th * th) * du);
    dinp[i] = local * dout[i];
  }
}

float crossentropy_forward(const OpContext& ctx, float* probs, float* losses, const float* logits,
                           const std::int32_t* targets, std::size_t R, std::size_t V) {
#pragma omp parallel for num_threads(team(ctx)) if (parallel : ctx.threads > 1) schedule(static)
  for (std::size_t r = 0; r < R; ++r) {
    const float* z = logits + r * V;
    float* p = probs + r * V;
    const float zmax = lanes::max(z, V);
#pragma omp simd
    for (std::size_t v = 0; v < V; ++v) p[v] = fast_exp(z[v] - zmax);
    const float sum = lanes::sum(p, V);
    const float inv = 1.0f / sum;
    for (std::size_t v = 0; v < V; ++v) p[v] *= inv;  // (X1) softmax
    const auto target = static_cast<std::size_t>(targets[r]);
    losses[r] = std::log(sum) - (z[target] - zmax);  // (X2) −log softmax[target]
  }
  double total = 0;  // in row order: the mean does not depend on the thread count
  for (std::size_t r = 0; r < R; ++r) total += losses[r];
  return static_cast<float>(total / static_cast<double>(R));
}

// Differentiates (X2) through (X1): dlogits = (softmax − onehot(target))·dloss.
void crossentropy_backward(const OpContext& ctx, float* dlogits, const float* probs,
                           const std::int32_t* targets, float dloss, std::size_t R, std::size_t V) {
#pragma omp parallel for num_threads(team(ctx)) if (parallel : ctx.threads > 1) schedule(static)
  for (std::size_t r = 0; r < R; ++r) {
    const float* p = probs + r * V;
    float* g = dlogits + r * V;
    for (std::size_t v = 0; v < V; ++v) g[v] = p[v] * dloss;
    const auto target = static_cast<std::size_t>(targets[r]);
    g[target] = (p[target] - 1.0f) * dloss;
  }
}

}  // namespace paci::model
