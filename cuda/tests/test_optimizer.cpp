// cuda::AdamW against model::AdamW over a whole stage layout (decay only on ≥ 2-D tensors, bias
// correction, grad_scale; the same operations, so expected bitwise), its bf16 compute copy, and
// the gradient utilities: accumulate, scale, zero, casts and the squared norm.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <vector>

#include "cuda/optimizer.hpp"
#include "model/optimizer.hpp"
#include "support.hpp"

namespace paci::cuda {
namespace {

using testing::close;
using testing::download;
using testing::random_floats;
using testing::upload;

class GpuOptimizer : public testing::GpuTest {
 protected:
  void SetUp() override {
    testing::GpuTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    stream_.emplace();
  }
  cudaStream_t s() { return stream_->get(); }
  std::optional<Stream> stream_;
};

model::ParamLayout small_layout() {
  const model::GptConfig config{
      .layers = 2, .heads = 2, .d_model = 16, .max_seq_len = 8, .vocab = 20};
  return model::ParamLayout(config, model::whole_model(config));
}

TEST_F(GpuOptimizer, AdamWMatchesTheCpuStepByStep) {
  const model::ParamLayout layout = small_layout();
  const std::size_t n = layout.size();
  const model::AdamWConfig config{.beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
  std::vector<float> params = random_floats(n, 1);
  model::AdamW cpu(layout, config);
  AdamW gpu(layout, config);
  auto d_params = upload(s(), params);
  DeviceTensor copy(Precision::bf16, n);
  const double lrs[] = {1e-3, 3e-4, 1e-2};
  const float scales[] = {1.0f, 0.5f, 0.25f};
  for (int step = 0; step < 3; ++step) {
    SCOPED_TRACE(step);
    const std::vector<float> grads = random_floats(n, 10 + static_cast<std::uint64_t>(step));
    auto d_grads = upload(s(), grads);
    cpu.step(params, grads, lrs[step], scales[step]);
    gpu.step(s(), d_params.data(), d_grads.data(), lrs[step], scales[step], copy.as<bf16>());
    // Expected bitwise (same operations, no FMA contraction, IEEE sqrt and division).
    const reference::Tolerance exact{0.0, 1e-6};
    EXPECT_TRUE(reference::all_close(download(s(), d_params.data(), n), params, exact, "params"));
    EXPECT_TRUE(reference::all_close(
        download(s(), gpu.first_moment(), n),
        std::vector<float>(cpu.first_moment().begin(), cpu.first_moment().end()), exact, "m"));
    EXPECT_TRUE(reference::all_close(
        download(s(), gpu.second_moment(), n),
        std::vector<float>(cpu.second_moment().begin(), cpu.second_moment().end()), exact, "v"));
    EXPECT_EQ(download(s(), copy.view()),
              testing::rounded(download(s(), d_params.data(), n), Precision::bf16));
  }
  EXPECT_EQ(gpu.steps(), 3u);
}

TEST_F(GpuOptimizer, GradientUtilities) {
  const std::size_t n = 100003;  // not a multiple of any block size
  const auto a = random_floats(n, 20), b = random_floats(n, 21);
  auto d_a = upload(s(), a), d_b = upload(s(), b);
  accumulate(s(), d_a.data(), d_b.data(), n);
  std::vector<float> sum(n);
  for (std::size_t i = 0; i < n; ++i) sum[i] = a[i] + b[i];
  EXPECT_EQ(download(s(), d_a.data(), n), sum);  // one float add: exact

  scale(s(), d_a.data(), n, 0.5f);
  for (float& v : sum) v *= 0.5f;
  EXPECT_EQ(download(s(), d_a.data(), n), sum);

  SquaredNorm norm;
  const double expected = model::squared_norm(sum);
  EXPECT_NEAR(norm(s(), d_a.data(), n), expected, 1e-12 * expected);

  DeviceTensor half(Precision::bf16, n);
  cast(s(), half.as<bf16>(), d_a.data(), n);
  EXPECT_EQ(download(s(), half.view()), testing::rounded(sum, Precision::bf16));
  cast(s(), d_b.data(), half.as<bf16>(), n);
  EXPECT_EQ(download(s(), d_b.data(), n), testing::rounded(sum, Precision::bf16));

  zero(s(), d_a.data(), n);
  EXPECT_EQ(download(s(), d_a.data(), n), std::vector<float>(n, 0.0f));
  EXPECT_EQ(norm(s(), d_a.data(), n), 0.0);
}

}  // namespace
}  // namespace paci::cuda
