// Test support: device discovery with the runtime's reason, random inputs, bf16 rounding and
// upload/download in either precision, and the tolerance rule (see support.hpp).
#include "support.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace paci::cuda::testing {

std::string missing_device() {
  std::string reason;
  if (device_count(&reason) > 0) return {};
  return "no CUDA device: " + reason;
}

bool gpu_required() {
  const char* value = std::getenv("PACI_REQUIRE_GPU");
  return value != nullptr && std::string(value) == "1";
}

std::string precision_name(const ::testing::TestParamInfo<Precision>& info) {
  return std::string(to_string(info.param));
}

std::vector<float> random_floats(std::size_t n, std::uint64_t seed, double scale) {
  return reference::to_float(reference::random_vec(n, seed, scale));
}

std::vector<float> rounded(std::vector<float> x, Precision precision) {
  if (precision == Precision::bf16) {
    for (float& v : x) v = __bfloat162float(__float2bfloat16_rn(v));
  }
  return x;
}

DeviceTensor upload(cudaStream_t stream, const std::vector<float>& host, Precision precision) {
  DeviceTensor device(precision, host.size());
  if (precision == Precision::fp32) {
    copy_to_device(stream, device.as<float>(), std::span<const float>(host));
  } else {
    std::vector<bf16> converted(host.size());
    for (std::size_t i = 0; i < host.size(); ++i) converted[i] = __float2bfloat16_rn(host[i]);
    copy_to_device(stream, device.as<bf16>(), std::span<const bf16>(converted));
  }
  return device;
}

std::vector<float> download(cudaStream_t stream, TensorView device) {
  std::vector<float> host(device.count);
  if (device.precision == Precision::fp32) {
    copy_to_host(stream, std::span<float>(host), device.as<float>());
  } else {
    std::vector<bf16> raw(device.count);
    copy_to_host(stream, std::span<bf16>(raw), device.as<bf16>());
    for (std::size_t i = 0; i < raw.size(); ++i) host[i] = __bfloat162float(raw[i]);
  }
  return host;
}

std::vector<float> download(cudaStream_t stream, const float* device, std::size_t n) {
  return download(stream, TensorView::of(device, n));
}

std::vector<float> pad_rows(const std::vector<float>& dense, std::size_t cols, std::size_t ld,
                            float fill) {
  const std::size_t rows = dense.size() / cols;
  std::vector<float> out(rows * ld, fill);
  for (std::size_t r = 0; r < rows; ++r)
    std::copy_n(dense.begin() + static_cast<std::ptrdiff_t>(r * cols), cols,
                out.begin() + static_cast<std::ptrdiff_t>(r * ld));
  return out;
}
std::vector<float> unpad_rows(const std::vector<float>& padded, std::size_t cols, std::size_t ld) {
  const std::size_t rows = padded.size() / ld;
  std::vector<float> out(rows * cols);
  for (std::size_t r = 0; r < rows; ++r)
    std::copy_n(padded.begin() + static_cast<std::ptrdiff_t>(r * ld), cols,
                out.begin() + static_cast<std::ptrdiff_t>(r * cols));
  return out;
}
std::vector<float> padding_of(const std::vector<float>& padded, std::size_t cols, std::size_t ld) {
  std::vector<float> out;
  for (std::size_t i = 0; i < padded.size(); ++i)
    if (i % ld >= cols) out.push_back(padded[i]);
  return out;
}

reference::Tolerance tolerance(Precision precision, std::span<const float> expected, double loosen,
                               double floor) {
  double largest = floor;
  for (float v : expected) largest = std::max(largest, static_cast<double>(std::fabs(v)));
  if (precision == Precision::fp32) return {1e-5 * largest * loosen, 1e-4 * loosen};
  return {2e-2 * largest * loosen, 2e-2 * loosen};
}

::testing::AssertionResult close(const std::vector<float>& actual,
                                 const std::vector<float>& expected, Precision precision,
                                 const std::string& what, double loosen) {
  return reference::all_close(actual, expected, tolerance(precision, expected, loosen),
                              what + " (" + std::string(to_string(precision)) + ")");
}

}  // namespace paci::cuda::testing
