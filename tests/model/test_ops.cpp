// Tests of model/ops.hpp: every layer's forward against the double reference, and its backward
// against central finite differences of that reference (h = 1e-5, error ~1e-9), sweeping shapes
// across the lane, block and GEMM-chunk boundaries; parameter gradients accumulate.
#include "model/ops.hpp"

#include <gtest/gtest.h>

#include <functional>

#include "model/vecmath.hpp"
#include "reference.hpp"

namespace paci::model {
namespace {

using namespace reference;

// Our float ops differ from the double reference only by float rounding over sums of at most a few
// hundred O(1) terms (and fast_tanh's 2e-7): measured worst 3e-7 absolute on O(1) values, 1e-5 on
// O(30) sums (relative 3e-7). The bounds leave a 5-10× margin for other BLAS kernels while any
// wrong term (a missing factor, an off-by-one index) shows up at 1e-2 or more.
constexpr Tolerance kForward{1e-6, 1e-5};
constexpr Tolerance kGrad{5e-6, 5e-5};

// d/dx of f at x by central differences, every coordinate.
Vec numeric_grad(const std::function<double(const Vec&)>& f, Vec x) {
  const double h = 1e-5;
  Vec g(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + h;
    const double up = f(x);
    x[i] = saved - h;
    const double down = f(x);
    x[i] = saved;
    g[i] = (up - down) / (2 * h);
  }
  return g;
}

double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Inputs as floats, and the same values in double for the reference.
struct Input {
  std::vector<float> f;
  Vec d;
  Input(std::size_t n, std::uint64_t seed, double scale = 1.0)
      : f(to_float(random_vec(n, seed, scale))), d(to_double(f)) {}
};

class Ops : public ::testing::TestWithParam<std::size_t> {  // parameter: thread count
 protected:
  OpContext ctx{GetParam(), nullptr};
};

TEST_P(Ops, Encoder) {
  const std::size_t B = 2, T = 5, C = 7, V = 6;
  auto tokens = random_ids(B * T, V, 1);
  tokens[3] = tokens[7] = 2;  // a repeated token sums its gradients
  Input wte(V * C, 2), wpe(T * C, 3), dy(B * T * C, 4);
  std::vector<float> out(B * T * C), dwte(V * C, 0.0f), dwpe(T * C, 0.0f);
  encoder_forward(ctx, out.data(), tokens.data(), wte.f.data(), wpe.f.data(), B, T, C);
  EXPECT_TRUE(all_close(out, encoder(tokens, wte.d, wpe.d, B, T, C), kForward, "encoder"));
  encoder_backward(ctx, dwte.data(), dwpe.data(), dy.f.data(), tokens.data(), B, T, C);
  auto loss_wte = [&](const Vec& w) { return dot(dy.d, encoder(tokens, w, wpe.d, B, T, C)); };
  auto loss_wpe = [&](const Vec& w) { return dot(dy.d, encoder(tokens, wte.d, w, B, T, C)); };
  EXPECT_TRUE(all_close(dwte, numeric_grad(loss_wte, wte.d), kGrad, "dwte"));
  EXPECT_TRUE(all_close(dwpe, numeric_grad(loss_wpe, wpe.d), kGrad, "dwpe"));
}

TEST_P(Ops, LayerNorm) {
  for (std::size_t C : {8, 13, 40}) {  // lane multiple, tail, several channel blocks
    SCOPED_TRACE(C);
    const std::size_t R = 6;
    Input x(R * C, 10 + C, 2.0), w(C, 11), b(C, 12), dy(R * C, 13);
    for (std::size_t i = 0; i < R * C; ++i) x.d[i] = x.f[i] += 0.5f;  // a non-zero mean
    std::vector<float> out(R * C), mean(R), rstd(R), dx(R * C, 0.0f), dw(C, 0.0f), db(C, 0.0f);
    layernorm_forward(ctx, out.data(), mean.data(), rstd.data(), x.f.data(), w.f.data(), b.f.data(),
                      R, C);
    EXPECT_TRUE(all_close(out, layernorm(x.d, w.d, b.d, R, C), kForward, "layernorm"));
    layernorm_backward(ctx, dx.data(), dw.data(), db.data(), dy.f.data(), x.f.data(), w.f.data(),
                       mean.data(), rstd.data(), R, C);
    auto by_x = [&](const Vec& v) { return dot(dy.d, layernorm(v, w.d, b.d, R, C)); };
    auto by_w = [&](const Vec& v) { return dot(dy.d, layernorm(x.d, v, b.d, R, C)); };
    auto by_b = [&](const Vec& v) { return dot(dy.d, layernorm(x.d, w.d, v, R, C)); };
    EXPECT_TRUE(all_close(dx, numeric_grad(by_x, x.d), kGrad, "dinp"));
    EXPECT_TRUE(all_close(dw, numeric_grad(by_w, w.d), kGrad, "dweight"));
    EXPECT_TRUE(all_close(db, numeric_grad(by_b, b.d), kGrad, "dbias"));
  }
}

TEST_P(Ops, Matmul) {
  struct Shape {
    std::size_t R, C, OC;
  };
  // 130 rows and 70 output channels cross the 64-row GEMM chunks (forward, dinp and dweight).
  for (Shape s : {Shape{4, 3, 5}, Shape{130, 9, 70}}) {
    SCOPED_TRACE(s.R);
    Input x(s.R * s.C, 20), w(s.OC * s.C, 21), b(s.OC, 22), res(s.R * s.OC, 23), dy(s.R * s.OC, 24);
    std::vector<float> out(s.R * s.OC), dx(s.R * s.C), dw(s.OC * s.C, 0.0f), db(s.OC, 0.0f);
    matmul_forward(ctx, out.data(), x.f.data(), w.f.data(), b.f.data(), nullptr, s.R, s.C, s.OC);
    EXPECT_TRUE(all_close(out, matmul(x.d, w.d, b.d, s.R, s.C, s.OC), kForward, "matmul"));
    matmul_forward(ctx, out.data(), x.f.data(), w.f.data(), b.f.data(), res.f.data(), s.R, s.C,
                   s.OC);
    Vec with_residual = matmul(x.d, w.d, b.d, s.R, s.C, s.OC);
    for (std::size_t i = 0; i < with_residual.size(); ++i) with_residual[i] += res.d[i];
    EXPECT_TRUE(all_close(out, with_residual, kForward, "matmul + residual"));
    matmul_backward(ctx, dx.data(), dw.data(), db.data(), dy.f.data(), x.f.data(), w.f.data(), s.R,
                    s.C, s.OC);
    auto by_x = [&](const Vec& v) { return dot(dy.d, matmul(v, w.d, b.d, s.R, s.C, s.OC)); };
    auto by_w = [&](const Vec& v) { return dot(dy.d, matmul(x.d, v, b.d, s.R, s.C, s.OC)); };
    auto by_b = [&](const Vec& v) { return dot(dy.d, matmul(x.d, w.d, v, s.R, s.C, s.OC)); };
    EXPECT_TRUE(all_close(dx, numeric_grad(by_x, x.d), kGrad, "dinp"));
    EXPECT_TRUE(all_close(dw, numeric_grad(by_w, w.d), kGrad, "dweight"));
    EXPECT_TRUE(all_close(db, numeric_grad(by_b, b.d), kGrad, "dbias"));
    // Parameter gradients accumulate: the micro-batch's sum is added once, so a second backward
    // doubles them exactly (g + g = 2g), as PyTorch's grad accumulation does.
    const std::vector<float> dw1 = dw, db1 = db;
    matmul_backward(ctx, dx.data(), dw.data(), db.data(), dy.f.data(), x.f.data(), w.f.data(), s.R,
                    s.C, s.OC);
    for (std::size_t i = 0; i < dw.size(); ++i) ASSERT_EQ(dw[i], 2 * dw1[i]);
    for (std::size_t i = 0; i < db.size(); ++i) ASSERT_EQ(db[i], 2 * db1[i]);
  }
}

// gemm_accumulate adds each call's product once, whatever the kernel's blocking of K: with K far
// past any kernel's K block, accumulating the same product twice from zero gives exactly 2x, and
// accumulating onto C gives C + Aᵀ·B (against the double reference). Rows cross the chunk sizes.
TEST_P(Ops, GemmAccumulateAddsEachProductOnce) {
  for (std::size_t M : {3, 64, 65, 300}) {
    SCOPED_TRACE(M);
    const std::size_t N = 37, K = 1500;
    Input a(K * M, 40), b(K * N, 41), c0(M * N, 42);
    auto accumulate = [&](std::vector<float>& into) {
      gemm_accumulate(ctx, Transpose::yes, Transpose::no, M, N, K, 1.0f, a.f.data(), M, b.f.data(),
                      N, into.data(), N);
    };
    std::vector<float> twice(M * N, 0.0f);
    accumulate(twice);
    const std::vector<float> once = twice;
    accumulate(twice);
    for (std::size_t i = 0; i < once.size(); ++i) ASSERT_EQ(twice[i], 2 * once[i]);
    std::vector<float> c = c0.f;
    accumulate(c);
    Vec want = c0.d;
    for (std::size_t m = 0; m < M; ++m)
      for (std::size_t k = 0; k < K; ++k)
        for (std::size_t n = 0; n < N; ++n) want[m * N + n] += a.d[k * M + m] * b.d[k * N + n];
    // Sums of 1500 O(1) products: float rounding ~1e-5 relative to the O(40) terms.
    EXPECT_TRUE(all_close(c, want, Tolerance{1e-3, 1e-4}, "C + AᵀB"));
  }
}

TEST_P(Ops, Attention) {
  struct Shape {
    std::size_t B, T, C, NH;
  };
  // T = 40 crosses the 32-row causal blocks; NH = 1 and 3 cover one head and an odd head count.
  for (Shape s : {Shape{2, 5, 8, 2}, Shape{1, 40, 6, 3}, Shape{2, 33, 4, 1}}) {
    SCOPED_TRACE(s.T);
    const std::size_t R = s.B * s.T;
    Input qkv(R * 3 * s.C, 30 + s.T), dy(R * s.C, 31);
    std::vector<float> out(R * s.C), att(s.B * s.NH * s.T * s.T), dqkv(R * 3 * s.C),
        datt(att.size());
    attention_forward(ctx, out.data(), att.data(), qkv.f.data(), s.B, s.T, s.C, s.NH);
    EXPECT_TRUE(all_close(out, attention(qkv.d, s.B, s.T, s.C, s.NH), kForward, "attention"));
    for (std::size_t t = 0; t < s.T; ++t) {  // the saved probabilities: causal rows summing to 1
      double sum = 0;
      for (std::size_t j = 0; j < s.T; ++j) {
        if (j > t) {
          ASSERT_EQ(att[t * s.T + j], 0.0f);
        }
        sum += att[t * s.T + j];
      }
      ASSERT_NEAR(sum, 1.0, 1e-6);
    }
    attention_backward(ctx, dqkv.data(), datt.data(), dy.f.data(), qkv.f.data(), att.data(), s.B,
                       s.T, s.C, s.NH);
    auto by_qkv = [&](const Vec& v) { return dot(dy.d, attention(v, s.B, s.T, s.C, s.NH)); };
    EXPECT_TRUE(all_close(dqkv, numeric_grad(by_qkv, qkv.d), kGrad, "dqkv"));
  }
}

TEST_P(Ops, Gelu) {
  Input x(300, 40, 3.0);
  x.f[0] = 12.0f, x.f[1] = -12.0f, x.f[2] = 0.0f;  // saturated tails and the origin
  x.d = to_double(x.f);
  Input dy(x.f.size(), 41);
  std::vector<float> out(x.f.size()), dx(x.f.size());
  gelu_forward(ctx, out.data(), x.f.data(), x.f.size());
  EXPECT_TRUE(all_close(out, gelu(x.d), kForward, "gelu"));
  gelu_backward(ctx, dx.data(), x.f.data(), dy.f.data(), x.f.size());
  auto by_x = [&](const Vec& v) { return dot(dy.d, gelu(v)); };
  EXPECT_TRUE(all_close(dx, numeric_grad(by_x, x.d), kGrad, "dgelu"));
}

TEST_P(Ops, CrossEntropy) {
  const std::size_t R = 7, V = 19;
  Input logits(R * V, 50, 3.0);
  const auto targets = random_ids(R, V, 51);
  std::vector<float> probs(R * V), losses(R), dlogits(R * V);
  const float loss =
      crossentropy_forward(ctx, probs.data(), losses.data(), logits.f.data(), targets.data(), R, V);
  EXPECT_NEAR(loss, crossentropy(logits.d, targets, R, V), 1e-5);
  // Mean loss scaled by 0.25 (a loss scale of 1/M with M = 4): each row's loss weighs 0.25/R.
  crossentropy_backward(ctx, dlogits.data(), probs.data(), targets.data(), 0.25f / R, R, V);
  auto by_logits = [&](const Vec& v) { return 0.25 * crossentropy(v, targets, R, V); };
  EXPECT_TRUE(all_close(dlogits, numeric_grad(by_logits, logits.d), kGrad, "dlogits"));
}

INSTANTIATE_TEST_SUITE_P(Threads, Ops, ::testing::Values(1, 2));

TEST(VecMath, ExpAndTanhAccuracy) {
  double exp_rel = 0, tanh_abs = 0;
  for (float x = -87.0f; x < 88.0f; x += 0.0123f) {
    const double e = std::exp(static_cast<double>(x));
    exp_rel = std::max(exp_rel, std::fabs(fast_exp(x) - e) / e);
  }
  for (float x = -10.0f; x < 10.0f; x += 0.00123f) {
    tanh_abs = std::max(tanh_abs, std::fabs(fast_tanh(x) - std::tanh(static_cast<double>(x))));
  }
  EXPECT_LT(exp_rel, 2.5e-7);  // about 2 ulp
  EXPECT_LT(tanh_abs, 3e-7);
  EXPECT_EQ(fast_tanh(20.0f), 1.0f);
  EXPECT_EQ(fast_tanh(-20.0f), -1.0f);
  EXPECT_GT(fast_exp(-200.0f), 0.0f);  // clamped to the smallest normal, documented
  EXPECT_LT(fast_exp(-200.0f), 1.2e-38f);
}

}  // namespace
}  // namespace paci::model
