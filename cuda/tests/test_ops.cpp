// Every GPU layer of cuda/ops.hpp against the CPU backend's (model/ops.hpp) on the same fresh
// random inputs (rounded to bf16 for the bf16 run), forward and backward, in fp32 (tight) and bf16
// (loose); parameter gradients start non-zero, so accumulation (+=) is checked too.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>

#include "cuda/gemm.hpp"
#include "cuda/ops.hpp"
#include "model/checkpoint_llmc.hpp"
#include "model/ops.hpp"
#include "support.hpp"

namespace paci::cuda {
namespace {

using testing::close;
using testing::download;
using testing::pad_rows;
using testing::padding_of;
using testing::random_floats;
using testing::rounded;
using testing::unpad_rows;
using testing::upload;

// Calls f with a value of the element type of precision p: f(float{}) or f(bf16{}).
template <typename F>
void dispatch(Precision p, F&& f) {
  if (p == Precision::fp32) {
    f(float{});
  } else {
    f(bf16{});
  }
}

class GpuOps : public testing::GpuPrecisionTest {
 protected:
  void SetUp() override {
    testing::GpuPrecisionTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    resources_.emplace(partial_floats(1024, 1024));
  }
  Precision p() const { return GetParam(); }
  OpContext ctx() { return resources_->context(); }
  cudaStream_t s() { return resources_->stream(); }
  std::vector<float> get(const DeviceTensor& t) { return download(s(), t.view()); }
  std::vector<float> get(const DeviceBuffer<float>& b) { return download(s(), b.data(), b.size()); }

  model::OpContext cpu{1, nullptr};
  std::optional<Resources> resources_;
};

TEST_P(GpuOps, Encoder) {
  const std::size_t B = 3, T = 17, C = 40, V = 11, R = B * T;
  auto tokens = reference::random_ids(R, V, 1);
  tokens[3] = tokens[7] = tokens[20] = 2;  // a repeated token sums its rows
  const auto wte = rounded(random_floats(V * C, 2), p()),
             wpe = rounded(random_floats(T * C, 3), p());
  const auto dy = rounded(random_floats(R * C, 4), p());
  const auto dwte0 = random_floats(V * C, 5), dwpe0 = random_floats(T * C, 6);
  std::vector<float> out(R * C), dwte = dwte0, dwpe = dwpe0;
  model::encoder_forward(cpu, out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);
  model::encoder_backward(cpu, dwte.data(), dwpe.data(), dy.data(), tokens.data(), B, T, C);

  std::vector<std::uint64_t> keys(R);
  std::vector<std::int32_t> rows(R), starts(R + 1), ids(R);
  const std::size_t count = group_tokens(tokens, keys, rows, starts, ids);
  auto d_tokens = upload(s(), tokens), d_rows = upload(s(), rows), d_starts = upload(s(), starts);
  auto d_ids = upload(s(), ids);
  auto d_wte = upload(s(), wte, p()), d_wpe = upload(s(), wpe, p()), d_dy = upload(s(), dy, p());
  auto d_dwte = upload(s(), dwte0), d_dwpe = upload(s(), dwpe0);
  DeviceTensor d_out(p(), R * C);
  const TokenGroups groups{d_rows.data(), d_starts.data(), d_ids.data(), count};
  dispatch(p(), [&](auto tag) {
    using X = decltype(tag);
    encoder_forward(ctx(), d_out.as<X>(), d_tokens.data(), d_wte.as<X>(), d_wpe.as<X>(), B, T, C);
    encoder_backward(ctx(), d_dwte.data(), d_dwpe.data(), d_dy.as<X>(), groups, B, T, C);
  });
  EXPECT_TRUE(close(get(d_out), out, p(), "encoder out"));
  EXPECT_TRUE(close(get(d_dwte), dwte, p(), "dwte"));
  EXPECT_TRUE(close(get(d_dwpe), dwpe, p(), "dwpe"));
}

TEST_P(GpuOps, LayerNorm) {
  for (std::size_t C : {40, 64, 200}) {  // R crosses the 128-row column-sum chunks
    SCOPED_TRACE(C);
    const std::size_t R = 300;
    auto x = random_floats(R * C, 10 + C, 2.0);
    for (float& v : x) v += 0.5f;  // a non-zero mean
    x = rounded(x, p());
    const auto w = rounded(random_floats(C, 11), p()), b = rounded(random_floats(C, 12), p());
    const auto dy = rounded(random_floats(R * C, 13), p());
    const auto dx0 = rounded(random_floats(R * C, 14), p());
    const auto dw0 = random_floats(C, 15), db0 = random_floats(C, 16);
    std::vector<float> out(R * C), mean(R), rstd(R), dx = dx0, dw = dw0, db = db0;
    model::layernorm_forward(cpu, out.data(), mean.data(), rstd.data(), x.data(), w.data(),
                             b.data(), R, C);
    model::layernorm_backward(cpu, dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(),
                              mean.data(), rstd.data(), R, C);

    auto d_x = upload(s(), x, p()), d_w = upload(s(), w, p()), d_b = upload(s(), b, p());
    auto d_dy = upload(s(), dy, p()), d_dx = upload(s(), dx0, p());
    auto d_dw = upload(s(), dw0), d_db = upload(s(), db0);
    DeviceTensor d_out(p(), R * C);
    DeviceBuffer<float> d_mean(R), d_rstd(R);
    dispatch(p(), [&](auto tag) {
      using X = decltype(tag);
      layernorm_forward(ctx(), d_out.as<X>(), d_mean.data(), d_rstd.data(), d_x.as<X>(),
                        d_w.as<X>(), d_b.as<X>(), R, C);
      layernorm_backward(ctx(), d_dx.as<X>(), d_dw.data(), d_db.data(), d_dy.as<X>(), d_x.as<X>(),
                         d_w.as<X>(), d_mean.data(), d_rstd.data(), R, C);
    });
    EXPECT_TRUE(close(get(d_out), out, p(), "layernorm out"));
    EXPECT_TRUE(close(get(d_mean), mean, Precision::fp32, "mean"));
    EXPECT_TRUE(close(get(d_rstd), rstd, Precision::fp32, "rstd", 10));
    EXPECT_TRUE(close(get(d_dx), dx, p(), "dinp"));
    EXPECT_TRUE(close(get(d_dw), dw, p(), "dweight"));
    EXPECT_TRUE(close(get(d_db), db, p(), "dbias"));
  }
}

struct MatmulCase {
  std::size_t R, C, OC;
  bool bias, residual, lt;
  std::size_t ld = 0;  // row stride of out, residual and dout (0: OC)
};

TEST_P(GpuOps, Matmul) {
  // 16-byte rows take the cuBLASLt path (bias epilogue, residual as C); the odd shape and lt=false
  // take the kernel + GEMM path. A padded row stride (the LM head's 50257 -> 50304) must neither
  // read nor write the padding: it holds a sentinel in out and garbage in residual and dout.
  const std::vector<MatmulCase> cases{
      {300, 64, 192, true, false, true},     {300, 64, 192, true, true, true},
      {300, 64, 192, false, true, true},     {300, 64, 192, false, false, true},
      {300, 64, 192, true, true, false},     {37, 40, 24, true, true, true},
      {33, 13, 7, true, true, true},         {33, 13, 7, false, false, true},
      {65, 32, 97, false, false, true, 128}, {65, 32, 97, true, true, true, 128},
      {65, 32, 97, true, true, false, 104}};
  const float sentinel = 7.0f, garbage = 1.0e4f;
  for (const MatmulCase& m : cases) {
    const std::size_t ld = m.ld == 0 ? m.OC : m.ld;
    SCOPED_TRACE(::testing::Message()
                 << "R=" << m.R << " C=" << m.C << " OC=" << m.OC << " bias=" << m.bias
                 << " residual=" << m.residual << " lt=" << m.lt << " ld=" << ld);
    const std::size_t R = m.R, C = m.C, OC = m.OC;
    const auto x = rounded(random_floats(R * C, 20), p()),
               w = rounded(random_floats(OC * C, 21), p());
    const auto b = rounded(random_floats(OC, 22), p()),
               res = rounded(random_floats(R * OC, 23), p());
    const auto dy = rounded(random_floats(R * OC, 24), p());
    const auto dw0 = random_floats(OC * C, 25), db0 = random_floats(OC, 26);
    std::vector<float> out(R * OC), dx(R * C), dw = dw0, db = db0;
    model::matmul_forward(cpu, out.data(), x.data(), w.data(), m.bias ? b.data() : nullptr,
                          m.residual ? res.data() : nullptr, R, C, OC);
    model::matmul_backward(cpu, dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), R,
                           C, OC);

    resources_->set_use_lt(m.lt);
    auto d_x = upload(s(), x, p()), d_w = upload(s(), w, p()), d_b = upload(s(), b, p());
    auto d_res = upload(s(), pad_rows(res, OC, ld, garbage), p());
    auto d_dy = upload(s(), pad_rows(dy, OC, ld, garbage), p());
    auto d_out = upload(s(), std::vector<float>(R * ld, sentinel), p());
    auto d_dw = upload(s(), dw0), d_db = upload(s(), db0);
    DeviceTensor d_dx(p(), R * C);
    dispatch(p(), [&](auto tag) {
      using X = decltype(tag);
      matmul_forward(ctx(), d_out.as<X>(), d_x.as<X>(), d_w.as<X>(),
                     m.bias ? d_b.as<X>() : static_cast<const X*>(nullptr),
                     m.residual ? d_res.as<X>() : static_cast<const X*>(nullptr), R, C, OC, m.ld);
      matmul_backward(ctx(), d_dx.as<X>(), d_dw.data(), d_db.data(), d_dy.as<X>(), d_x.as<X>(),
                      d_w.as<X>(), R, C, OC, m.ld);
    });
    const std::vector<float> got = get(d_out);
    EXPECT_TRUE(close(unpad_rows(got, OC, ld), out, p(), "matmul out"));
    EXPECT_EQ(padding_of(got, OC, ld), std::vector<float>(R * (ld - OC), sentinel));
    EXPECT_TRUE(close(get(d_dx), dx, p(), "dinp"));
    EXPECT_TRUE(close(get(d_dw), dw, p(), "dweight"));
    EXPECT_TRUE(close(get(d_db), db, p(), "dbias"));
  }
}

// The reason for the padded stride: with rows of V = 50257 elements cuBLASLt declines the LM
// head (its rows are not 16-byte aligned) and the GEMM path runs it; padded to 50304 it must take
// the Lt path. Run on GPT-2-small's head (C 768) and a small odd one. Should this fail on some
// cuBLAS, the head is still computed right (the GEMM path), only slower.
TEST_P(GpuOps, PaddedHeadTakesCublasLt) {
  struct Case {
    std::size_t R, C, V;
  };
  for (const Case c : {Case{256, 768, 50257}, Case{300, 64, 97}}) {
    const std::size_t ld = model::llmc_padded_vocab(c.V);
    SCOPED_TRACE(::testing::Message() << "R=" << c.R << " C=" << c.C << " V=" << c.V);
    DeviceTensor x(p(), c.R * c.C), w(p(), c.V * c.C), out(p(), c.R * ld);
    for (DeviceTensor* t : {&x, &w, &out})
      PACI_CUDA_CHECK(cudaMemsetAsync(t->view().data, 0, t->bytes(), s()));
    const cudaDataType_t type = p() == Precision::fp32 ? CUDA_R_32F : CUDA_R_16BF;
    EXPECT_FALSE(lt_linear_forward(ctx(), out.view().data, x.view().data, w.view().data, nullptr,
                                   nullptr, type, c.R, c.C, c.V, c.V))
        << "unpadded rows are not 16-byte aligned in either precision (V is odd)";
    EXPECT_TRUE(lt_linear_forward(ctx(), out.view().data, x.view().data, w.view().data, nullptr,
                                  nullptr, type, c.R, c.C, c.V, ld))
        << "cuBLASLt has no algorithm for the padded head";
    PACI_CUDA_CHECK(cudaStreamSynchronize(s()));
  }
}

TEST_P(GpuOps, Attention) {
  for (std::size_t T : {1, 33, 64}) {
    SCOPED_TRACE(T);
    const std::size_t B = 2, C = 64, NH = 4, R = B * T;
    const auto qkv = rounded(random_floats(R * 3 * C, 30 + T), p());
    const auto dy = rounded(random_floats(R * C, 31 + T), p());
    std::vector<float> out(R * C), att(B * NH * T * T), dqkv(R * 3 * C), datt(att.size());
    model::attention_forward(cpu, out.data(), att.data(), qkv.data(), B, T, C, NH);
    model::attention_backward(cpu, dqkv.data(), datt.data(), dy.data(), qkv.data(), att.data(), B,
                              T, C, NH);

    auto d_qkv = upload(s(), qkv, p()), d_dy = upload(s(), dy, p());
    DeviceTensor d_out(p(), R * C), d_att(p(), att.size()), d_dqkv(p(), dqkv.size());
    DeviceTensor d_dsoft(p(), att.size());
    DeviceBuffer<float> d_scores(att.size());
    dispatch(p(), [&](auto tag) {
      using X = decltype(tag);
      attention_forward(ctx(), d_out.as<X>(), d_att.as<X>(), d_scores.data(), d_qkv.as<X>(), B, T,
                        C, NH);
      attention_backward(ctx(), d_dqkv.as<X>(), d_scores.data(), d_dsoft.as<X>(), d_dy.as<X>(),
                         d_qkv.as<X>(), d_att.as<X>(), B, T, C, NH);
    });
    EXPECT_TRUE(close(get(d_out), out, p(), "attention out"));
    EXPECT_TRUE(close(get(d_att), att, p(), "att (zeros above the diagonal)"));
    EXPECT_TRUE(close(get(d_dqkv), dqkv, p(), "dqkv"));
  }
}

TEST_P(GpuOps, Gelu) {
  const std::size_t N = 1000;
  const auto x = rounded(random_floats(N, 40, 3.0), p()), dy = rounded(random_floats(N, 41), p());
  std::vector<float> out(N), dx = dy;
  model::gelu_forward(cpu, out.data(), x.data(), N);
  model::gelu_backward(cpu, dx.data(), x.data(), dx.data(), N);  // in place, as the stage runs it
  auto d_x = upload(s(), x, p()), d_dx = upload(s(), dy, p());
  DeviceTensor d_out(p(), N);
  dispatch(p(), [&](auto tag) {
    using X = decltype(tag);
    gelu_forward(ctx(), d_out.as<X>(), d_x.as<X>(), N);
    gelu_backward(ctx(), d_dx.as<X>(), d_x.as<X>(), d_dx.as<X>(), N);
  });
  EXPECT_TRUE(close(get(d_out), out, p(), "gelu"));
  EXPECT_TRUE(close(get(d_dx), dx, p(), "gelu backward"));
}

TEST_P(GpuOps, CrossEntropy) {
  // ld > V: the logits' padding (the LM head's 50257 -> 50304) holds values far above every real
  // logit; masked, it changes neither the softmax nor the loss, and its gradient is zero.
  struct Case {
    std::size_t V, ld;
  };
  for (const Case c : {Case{50, 50}, Case{1000, 1000}, Case{97, 128}, Case{1000, 1024}}) {
    const std::size_t V = c.V, ld = c.ld;
    SCOPED_TRACE(::testing::Message() << "V=" << V << " ld=" << ld);
    const std::size_t R = 37;
    const float dloss = 0.37f;
    const auto logits = rounded(random_floats(R * V, 50 + V, 3.0), p());
    const auto targets = reference::random_ids(R, V, 51);
    std::vector<float> probs(R * V), losses(R), dlogits(R * V);
    const float mean = model::crossentropy_forward(cpu, probs.data(), losses.data(), logits.data(),
                                                   targets.data(), R, V);
    model::crossentropy_backward(cpu, dlogits.data(), probs.data(), targets.data(), dloss, R, V);

    auto d_logits = upload(s(), pad_rows(logits, V, ld, 100.0f), p());
    auto d_targets = upload(s(), targets);
    DeviceBuffer<float> d_probs(R * V), d_losses(R);
    DeviceBuffer<double> d_mean(1);
    auto d_dlogits = upload(s(), std::vector<float>(R * ld, 5.0f), p());
    dispatch(p(), [&](auto tag) {
      using X = decltype(tag);
      crossentropy_forward(ctx(), d_probs.data(), d_losses.data(), d_logits.as<X>(),
                           d_targets.data(), R, V, ld);
      mean_of(ctx(), d_mean.data(), d_losses.data(), R);
      crossentropy_backward(ctx(), d_dlogits.as<X>(), d_probs.data(), d_targets.data(), dloss, R, V,
                            ld);
    });
    double gpu_mean = 0;
    copy_to_host(s(), std::span<double>(&gpu_mean, 1), d_mean.data());
    // Same (rounded) logits on both sides: float softmax, so fp32 bounds whatever the precision.
    EXPECT_TRUE(close(get(d_probs), probs, Precision::fp32, "probs"));
    EXPECT_TRUE(close(get(d_losses), losses, Precision::fp32, "losses"));
    EXPECT_NEAR(gpu_mean, mean, 1e-5 * std::max(1.0f, mean));
    const std::vector<float> got = get(d_dlogits);
    EXPECT_TRUE(close(unpad_rows(got, V, ld), dlogits, p(), "dlogits"));
    EXPECT_EQ(padding_of(got, V, ld), std::vector<float>(R * (ld - V), 0.0f));
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, GpuOps, ::testing::Values(Precision::fp32, Precision::bf16),
                         testing::precision_name);

}  // namespace
}  // namespace paci::cuda
