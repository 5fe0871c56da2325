// Shared by the CUDA backend's tests: the GPU-or-skip guard, host ↔ device helpers in either
// precision, and the one tolerance rule on top of the model tests' checker, reference::all_close
// (|a − b| ≤ atol + rtol·|b|). Everything that touches the device runs only after the guard.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "cuda/device.hpp"
#include "cuda/memory.hpp"
#include "cuda/precision.hpp"
#include "reference.hpp"

namespace paci::cuda {
namespace reference = model::reference;  // the model tests' references and checker
// Names a precision in test names and failure messages.
inline void PrintTo(Precision p, std::ostream* os) {
  *os << to_string(p);
}
}  // namespace paci::cuda

namespace paci::cuda::testing {

// Empty when a CUDA device is usable; else "no CUDA device: <the runtime's reason>".
std::string missing_device();
// PACI_REQUIRE_GPU=1 in the environment (scripts/gpu_check.sh): a missing device fails the test.
bool gpu_required();

// At the top of a test (or SetUp): skips, saying why, where there is no GPU.
#define PACI_REQUIRE_GPU()                                                           \
  do {                                                                               \
    const std::string paci_missing_device = ::paci::cuda::testing::missing_device(); \
    if (!paci_missing_device.empty()) {                                              \
      if (::paci::cuda::testing::gpu_required()) {                                   \
        FAIL() << paci_missing_device << " (and PACI_REQUIRE_GPU=1)";                \
      }                                                                              \
      GTEST_SKIP() << paci_missing_device;                                           \
    }                                                                                \
  } while (false)

// Base fixture of every test that needs a device.
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override { PACI_REQUIRE_GPU(); }
};
// The same, swept over the two precisions.
class GpuPrecisionTest : public ::testing::TestWithParam<Precision> {
 protected:
  void SetUp() override { PACI_REQUIRE_GPU(); }
};
std::string precision_name(const ::testing::TestParamInfo<Precision>& info);

// Random floats (deterministic per seed), uniform in [−scale, scale].
std::vector<float> random_floats(std::size_t n, std::uint64_t seed, double scale = 1.0);
// The values a GPU computing in `precision` holds for x: x itself, or x rounded to bf16.
std::vector<float> rounded(std::vector<float> x, Precision precision);

DeviceTensor upload(cudaStream_t stream, const std::vector<float>& host, Precision precision);
template <typename T>
DeviceBuffer<T> upload(cudaStream_t stream, const std::vector<T>& host) {
  DeviceBuffer<T> device(host.size());
  copy_to_device(stream, device.data(), std::span<const T>(host));
  return device;
}
std::vector<float> download(cudaStream_t stream, TensorView device);
std::vector<float> download(cudaStream_t stream, const float* device, std::size_t n);

// Rows of `cols` values spread `ld` apart, the padding columns holding `fill`; back to dense rows;
// and the padding columns alone, in order.
std::vector<float> pad_rows(const std::vector<float>& dense, std::size_t cols, std::size_t ld,
                            float fill);
std::vector<float> unpad_rows(const std::vector<float>& padded, std::size_t cols, std::size_t ld);
std::vector<float> padding_of(const std::vector<float>& padded, std::size_t cols, std::size_t ld);

// The bound for a GPU result against the CPU backend's: fp32 atol 1e-5 and rtol 1e-4, bf16 2e-2
// and 2e-2, atol scaled by max(floor, max|expected|) (a sum of many terms errs in proportion to
// the terms, not to each entry; floor 1 suits O(1) inputs, 0 bounds relative to the tensor's
// largest entry) and both multiplied by `loosen`.
reference::Tolerance tolerance(Precision precision, std::span<const float> expected,
                               double loosen = 1.0, double floor = 1.0);
::testing::AssertionResult close(const std::vector<float>& actual,
                                 const std::vector<float>& expected, Precision precision,
                                 const std::string& what, double loosen = 1.0);

}  // namespace paci::cuda::testing
