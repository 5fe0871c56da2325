// The mixture-of-experts MLP of a block (config.hpp, MoeConfig): route, gather each expert's rows,
// run its SwiGLU FFN as three GEMMs, and combine; the backward mirrors it. Each expert's rows are
// contiguous (first_row), so an expert is one GEMM per weight, and every combine or scatter adds
// a token's K terms in choice order: no result depends on the thread count.
#include <algorithm>
#include <cstring>

#include "model/lanes.hpp"
#include "model/stage.hpp"

namespace paci::model {

namespace {

// Expert e's rows [r0, r0 + n) of a block's expert rows and its weights' offsets in the stage
// buffer (w1, w3 (H,C), w2 (C,H)); the shared expert's weights the same way.
struct ExpertPart {
  std::size_t r0 = 0, n = 0;
  std::size_t w1 = 0, w3 = 0, w2 = 0;
};

ExpertPart weights_at(std::size_t w1, const GptConfig& c) {
  const std::size_t HC = c.moe.hidden * c.d_model;
  return {0, 0, w1, w1 + HC, w1 + 2 * HC};
}

// Expert e (held by this stage: e in [first, end) of its shard).
ExpertPart expert_part(const BlockOffsets& w, const std::int32_t* first_row, std::size_t e,
                       const StageShape& shape) {
  const GptConfig& c = shape.config;
  const std::size_t local = e - shape.experts.first(c.moe.experts);
  ExpertPart part = weights_at(w.experts + local * expert_floats(c), c);
  part.r0 = static_cast<std::size_t>(first_row[e]);
  part.n = static_cast<std::size_t>(first_row[e + 1]) - part.r0;
  return part;
}

}  // namespace

void Stage::share_expert_rows(float* rows, const std::int32_t* first_row) {
  const ExpertShard& shard = shape_.experts;
  if (shard.whole()) return;
  PACI_MODEL_CHECK(exchange_ != nullptr,
                   "a stage holding expert part {} of {} has no expert group to share rows with",
                   shard.index, shard.count);
  const std::size_t E = shape_.config.moe.experts, C = shape_.config.d_model;
  share_first_.resize(shard.count + 1);
  for (std::size_t m = 0; m <= shard.count; ++m)
    share_first_[m] = static_cast<std::size_t>(first_row[m * (E / shard.count)]);
  exchange_->share(std::span<float>(rows, share_first_.back() * C), share_first_, C);
}

std::size_t Stage::moe_stash_floats() const {
  const MoeConfig& m = shape_.config.moe;
  const std::size_t R = shape_.rows(), C = shape_.config.d_model, H = m.hidden;
  const std::size_t N = R * m.top_k;
  return R * m.experts + N * C + 2 * N * H + (m.shared_expert ? R * C + 2 * R * H : 0);
}

void Stage::moe_forward(const float* p, const BlockOffsets& w, ActivationSlot& slot,
                        const BlockActivations& a) {
  const MoeConfig& m = shape_.config.moe;
  const std::size_t R = shape_.rows(), C = shape_.config.d_model;
  const std::size_t E = m.experts, K = m.top_k, H = m.hidden;
  const float* ln2 = slot.data(a.ln2);
  const float* res2 = slot.data(a.residual2);
  float* out = slot.data(a.out);
  // (X1) router logits, (X2) routing and the load-balancing loss
  matmul_forward(ctx(), router_.data(), ln2, p + w.router_w, nullptr, nullptr, R, C, E);
  const MoeRouting r{slot.data(a.probs),    slot.data(a.gates), slot.ids(a.choice), slot.ids(a.row),
                     slot.ids(a.first_row), slot.ids(a.chosen), &route_scratch_};
  *slot.data(a.aux) =
      moe_route(r, router_.data(), R, E, K, m.capacity(R), static_cast<float>(m.aux_loss_coef));
  // (X3) gather each kept assignment's token into its expert's rows
  float* xe = slot.data(a.xe);
#pragma omp parallel for num_threads(team(ctx())) if (parallel : threads_ > 1) schedule(static)
  for (std::size_t t = 0; t < R; ++t)
    for (std::size_t j = 0; j < K; ++j) {
      const std::int32_t row = r.row[t * K + j];
      if (row >= 0) std::memcpy(xe + row * C, ln2 + t * C, C * sizeof(float));
    }
  // (X4) expert e: ye = w2·(silu(w1·x) ⊙ w3·x) on its rows; with expert parallelism, this
  // stage's experts, then every member's rows from the member that holds them
  for (std::size_t e = shape_.experts.first(E); e < shape_.experts.end(E); ++e) {
    const auto [r0, n, o1, o3, o2] = expert_part(w, r.first_row, e, shape_);
    if (n == 0) continue;
    const float *w1 = p + o1, *w3 = p + o3, *w2 = p + o2;
    float* ea = slot.data(a.ea) + r0 * H;
    float* eb = slot.data(a.eb) + r0 * H;
    float* eh = slot.data(a.eh) + r0 * H;
    matmul_forward(ctx(), ea, xe + r0 * C, w1, nullptr, nullptr, n, C, H);
    matmul_forward(ctx(), eb, xe + r0 * C, w3, nullptr, nullptr, n, C, H);
    swiglu_forward(ctx(), eh, ea, eb, n * H);
    matmul_forward(ctx(), slot.data(a.ey) + r0 * C, eh, w2, nullptr, nullptr, n, H, C);
  }
  share_expert_rows(slot.data(a.ey), r.first_row);
  // (X5) out = res2 + shared(ln2), (X6) then + Σ_j gate_j·ye[row_j] in choice order
  if (m.shared_expert) {
    const ExpertPart shared = weights_at(w.shared, shape_.config);
    const float *w1 = p + shared.w1, *w3 = p + shared.w3, *w2 = p + shared.w2;
    matmul_forward(ctx(), slot.data(a.sa), ln2, w1, nullptr, nullptr, R, C, H);
    matmul_forward(ctx(), slot.data(a.sb), ln2, w3, nullptr, nullptr, R, C, H);
    swiglu_forward(ctx(), slot.data(a.sh), slot.data(a.sa), slot.data(a.sb), R * H);
    matmul_forward(ctx(), out, slot.data(a.sh), w2, nullptr, res2, R, H, C);
  } else {
    std::memcpy(out, res2, R * C * sizeof(float));
  }
  const float* ey = slot.data(a.ey);
#pragma omp parallel for num_threads(team(ctx())) if (parallel : threads_ > 1) schedule(static)
  for (std::size_t t = 0; t < R; ++t)
    for (std::size_t j = 0; j < K; ++j) {
      const std::int32_t row = r.row[t * K + j];
      if (row < 0) continue;
      const float gate = r.gates[t * K + j];
      const float* y = ey + row * C;
      float* o = out + t * C;
      for (std::size_t c = 0; c < C; ++c) o[c] += gate * y[c];
    }
}

void Stage::moe_backward(const float* p, float* g, const BlockOffsets& w,
                         const ActivationSlot& slot, const BlockActivations& a, const float* dy,
                         float* keep) {
  const MoeConfig& m = shape_.config.moe;
  const std::size_t R = shape_.rows(), C = shape_.config.d_model;
  const std::size_t E = m.experts, K = m.top_k, H = m.hidden, N = R * K;
  const float* gates = slot.data(a.gates);
  const std::int32_t* rows = slot.ids(a.row);
  const std::int32_t* first = slot.ids(a.first_row);
  const float* ey = slot.data(a.ey);
  // What the weight gradients need, in moe_backward_weight's layout: straight into the stash
  // (split), or into scratch and added to g at the end (fused): the same arithmetic either way.
  float* kept = keep ? keep : moe_kept_.data();
  float* dlogits = kept;
  float* dye = dlogits + R * E;
  float* da = dye + N * C;
  float* db = da + N * H;
  // (X6) dgates and each kept row's d(ye) = gate·dy
#pragma omp parallel for num_threads(team(ctx())) if (parallel : threads_ > 1) schedule(static)
  for (std::size_t t = 0; t < R; ++t)
    for (std::size_t j = 0; j < K; ++j) {
      const std::int32_t row = rows[t * K + j];
      if (row < 0) {
        dgates_[t * K + j] = 0;
        continue;
      }
      const float gate = gates[t * K + j];
      const float* d = dy + t * C;
      dgates_[t * K + j] = lanes::dot(d, ey + row * C, C);
      float* o = dye + row * C;
      for (std::size_t c = 0; c < C; ++c) o[c] = gate * d[c];
    }
  // (X4) each expert's input half (this stage's experts; then every member's rows)
  for (std::size_t e = shape_.experts.first(E); e < shape_.experts.end(E); ++e) {
    const auto [r0, n, w1, w3, w2] = expert_part(w, first, e, shape_);
    if (n == 0) continue;
    matmul_backward_input(ctx(), dh_.data(), dye + r0 * C, p + w2, n, H, C);
    swiglu_backward(ctx(), da + r0 * H, db + r0 * H, dh_.data(), slot.data(a.ea) + r0 * H,
                    slot.data(a.eb) + r0 * H, n * H);
    float* dx = dxe_.data() + r0 * C;
    matmul_backward_input(ctx(), dx, da + r0 * H, p + w1, n, C, H);
    gemm(ctx(), Transpose::no, Transpose::no, n, C, H, 1.0f, db + r0 * H, H, p + w3, C, 1.0f, dx,
         C);
  }
  share_expert_rows(dxe_.data(), first);
  // (X2, X1) the router: dlogits from the gates and the load-balancing loss, then dln
  moe_route_backward(ctx(), dlogits, slot.data(a.probs), gates, slot.ids(a.choice),
                     slot.ids(a.chosen), dgates_.data(), R, E, K,
                     static_cast<float>(m.aux_loss_coef), slot.loss_scale());
  matmul_backward_input(ctx(), dln_.data(), dlogits, p + w.router_w, R, C, E);
  // (X5) the shared expert sees dy itself
  if (m.shared_expert) {
    const auto [r0, n, w1, w3, w2] = weights_at(w.shared, shape_.config);
    float* sdy = db + N * H;
    float* sda = sdy + R * C;
    float* sdb = sda + R * H;
    std::memcpy(sdy, dy, R * C * sizeof(float));
    matmul_backward_input(ctx(), dh_.data(), dy, p + w2, R, H, C);
    swiglu_backward(ctx(), sda, sdb, dh_.data(), slot.data(a.sa), slot.data(a.sb), R * H);
    gemm(ctx(), Transpose::no, Transpose::no, R, C, H, 1.0f, sda, H, p + w1, C, 1.0f, dln_.data(),
         C);
    gemm(ctx(), Transpose::no, Transpose::no, R, C, H, 1.0f, sdb, H, p + w3, C, 1.0f, dln_.data(),
         C);
  }
  // (X3) scatter: each token's kept rows' input gradients, in choice order
#pragma omp parallel for num_threads(team(ctx())) if (parallel : threads_ > 1) schedule(static)
  for (std::size_t t = 0; t < R; ++t)
    for (std::size_t j = 0; j < K; ++j) {
      const std::int32_t row = rows[t * K + j];
      if (row < 0) continue;
      const float* d = dxe_.data() + row * C;
      float* o = dln_.data() + t * C;
      for (std::size_t c = 0; c < C; ++c) o[c] += d[c];
    }
  if (g != nullptr) moe_backward_weight(g, w, slot, a, kept);
}

void Stage::moe_backward_weight(float* g, const BlockOffsets& w, const ActivationSlot& slot,
                                const BlockActivations& a, const float* kept) {
  const MoeConfig& m = shape_.config.moe;
  const std::size_t R = shape_.rows(), C = shape_.config.d_model;
  const std::size_t E = m.experts, K = m.top_k, H = m.hidden, N = R * K;
  const float* ln2 = slot.data(a.ln2);
  const float* xe = slot.data(a.xe);
  const float* dlogits = kept;
  const float* dye = dlogits + R * E;
  const float* da = dye + N * C;
  const float* db = da + N * H;
  const std::int32_t* first = slot.ids(a.first_row);
  for (std::size_t e = shape_.experts.first(E); e < shape_.experts.end(E); ++e) {
    const auto [r0, n, w1, w3, w2] = expert_part(w, first, e, shape_);
    if (n == 0) continue;
    matmul_backward_weight(ctx(), g + w2, nullptr, dye + r0 * C, slot.data(a.eh) + r0 * H, n, H, C);
    matmul_backward_weight(ctx(), g + w1, nullptr, da + r0 * H, xe + r0 * C, n, C, H);
    matmul_backward_weight(ctx(), g + w3, nullptr, db + r0 * H, xe + r0 * C, n, C, H);
  }
  matmul_backward_weight(ctx(), g + w.router_w, nullptr, dlogits, ln2, R, C, E);
  if (m.shared_expert) {
    const auto [r0, n, w1, w3, w2] = weights_at(w.shared, shape_.config);
    const float* sdy = db + N * H;
    const float* sda = sdy + R * C;
    const float* sdb = sda + R * H;
    matmul_backward_weight(ctx(), g + w2, nullptr, sdy, slot.data(a.sh), R, H, C);
    matmul_backward_weight(ctx(), g + w1, nullptr, sda, ln2, R, C, H);
    matmul_backward_weight(ctx(), g + w3, nullptr, sdb, ln2, R, C, H);
  }
}

}  // namespace paci::model
