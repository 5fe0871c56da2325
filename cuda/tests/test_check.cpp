// Tests of the CUDA backend that need no GPU (they run in CI): the check macros' messages, the
// precision tags, the host half of the encoder backward (token grouping) and slot sizes.
#include <gtest/gtest.h>

#include <iostream>
#include <string>
#include <vector>

#include "cuda/activations.hpp"
#include "cuda/check.hpp"
#include "cuda/ops.hpp"
#include "cuda/precision.hpp"
#include "model/check.hpp"
#include "support.hpp"

namespace paci::cuda {
namespace {

std::string message_of(void (*call)()) {
  try {
    call();
  } catch (const CudaError& e) {
    return e.what();
  }
  return "no exception";
}

TEST(CudaCheck, ReportsFileLineExpressionAndTheRuntimesText) {
  const std::string m = message_of([] { PACI_CUDA_CHECK(cudaErrorInvalidValue); });
  EXPECT_NE(m.find("test_check.cpp:"), std::string::npos) << m;
  EXPECT_NE(m.find("CUDA error 1"), std::string::npos) << m;
  EXPECT_NE(m.find("cudaErrorInvalidValue"), std::string::npos) << m;
  EXPECT_NE(m.find("in cudaErrorInvalidValue"), std::string::npos) << m;  // the expression
}

TEST(CudaCheck, ReportsCublasStatusNames) {
  const std::string m = message_of([] { PACI_CUBLAS_CHECK(CUBLAS_STATUS_NOT_SUPPORTED); });
  EXPECT_NE(m.find("cuBLAS error"), std::string::npos) << m;
  EXPECT_NE(m.find("CUBLAS_STATUS_NOT_SUPPORTED"), std::string::npos) << m;
  EXPECT_EQ(message_of([] { PACI_CUBLAS_CHECK(CUBLAS_STATUS_SUCCESS); }), "no exception");
  EXPECT_EQ(message_of([] { PACI_CUDA_CHECK(cudaSuccess); }), "no exception");
}

TEST(CudaCheck, RequireNamesTheConditionAndMessage) {
  const std::string m = message_of([] { PACI_CUDA_REQUIRE(1 + 1 == 3, "arithmetic"); });
  EXPECT_NE(m.find("check failed: 1 + 1 == 3: arithmetic"), std::string::npos) << m;
}

TEST(CudaPrecision, NamesSizesAndParsing) {
  EXPECT_EQ(element_bytes(Precision::fp32), 4u);
  EXPECT_EQ(element_bytes(Precision::bf16), 2u);
  EXPECT_EQ(parse_precision("bf16"), Precision::bf16);
  EXPECT_EQ(to_string(parse_precision("fp32")), "fp32");
  EXPECT_THROW(parse_precision("fp16"), model::ModelError);
}

TEST(CudaPrecision, ViewsRefuseTheOtherPrecision) {
  float x = 0;
  const TensorView view = TensorView::of(&x, 1);
  EXPECT_EQ(view.as<float>(), &x);
  EXPECT_THROW(view.as<bf16>(), model::ModelError);
  EXPECT_TRUE(DeviceBuffer<float>(0).empty());  // no device needed for nothing
}

TEST(CudaTokenGroups, GroupsRowsByTokenKeepingRowOrder) {
  const std::vector<std::int32_t> tokens{5, 2, 5, 0, 2, 5};
  const std::size_t R = tokens.size();
  std::vector<std::uint64_t> keys(R);
  std::vector<std::int32_t> rows(R), starts(R + 1), group_ids(R);
  const std::size_t groups = group_tokens(tokens, keys, rows, starts, group_ids);
  ASSERT_EQ(groups, 3u);
  EXPECT_EQ(std::vector<std::int32_t>(group_ids.begin(), group_ids.begin() + 3),
            (std::vector<std::int32_t>{0, 2, 5}));
  EXPECT_EQ(rows, (std::vector<std::int32_t>{3, 1, 4, 0, 2, 5}));
  EXPECT_EQ(std::vector<std::int32_t>(starts.begin(), starts.begin() + 4),
            (std::vector<std::int32_t>{0, 1, 3, 6}));
}

TEST(CudaActivationSlot, Bf16HalvesTheActivationsButNotTheStatistics) {
  model::StageShape shape;
  shape.config = {.layers = 2, .heads = 2, .d_model = 16, .max_seq_len = 8, .vocab = 10};
  shape.range = model::whole_model(shape.config);
  shape.batch = 2;
  shape.seq_len = 8;
  const std::size_t fp32 = ActivationSlot::bytes_for(shape, Precision::fp32);
  const std::size_t bf16 = ActivationSlot::bytes_for(shape, Precision::bf16);
  // fp32 holds what the CPU slot holds, plus the token grouping (3R + 1 ids).
  EXPECT_EQ(fp32, model::ActivationSlot::bytes_for(shape) + (3 * shape.rows() + 1) * 4);
  EXPECT_LT(bf16, fp32);
  EXPECT_GT(bf16, fp32 / 2);  // the float statistics and probabilities stay float
}

TEST(CudaDevice, SaysWhyWhenThereIsNone) {
  std::string reason;
  const int count = device_count(&reason);
  if (count == 0) {
    EXPECT_FALSE(reason.empty());
    EXPECT_FALSE(testing::missing_device().empty());
  } else {
    EXPECT_TRUE(testing::missing_device().empty());
    std::cout << "[ device   ] " << device_description() << "\n";
  }
}

}  // namespace
}  // namespace paci::cuda
