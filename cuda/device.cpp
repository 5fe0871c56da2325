// Device discovery and Resources construction. The cuBLAS handle gets the same workspace size
// as cuBLASLt's by default (cuBLAS allocates its own); nothing here runs a kernel.
#include "cuda/device.hpp"

#include <string>

namespace paci::cuda {

int device_count(std::string* reason) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    if (reason != nullptr) {
      *reason = std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status);
    }
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return 0;
  }
  if (count == 0 && reason != nullptr) *reason = "cudaGetDeviceCount found 0 devices";
  return count;
}

std::string device_description() {
  int device = 0;
  PACI_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  PACI_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  const double gib = static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0);
  return std::string(prop.name) + " (sm_" + std::to_string(prop.major) +
         std::to_string(prop.minor) + ", " + std::to_string(prop.multiProcessorCount) + " SMs, " +
         std::to_string(static_cast<int>(gib * 10) / 10) + "." +
         std::to_string(static_cast<int>(gib * 10) % 10) + " GiB)";
}

Resources::Resources(std::size_t partial_floats, std::size_t lt_workspace_bytes)
    : blas_(stream_.get()), workspace_(lt_workspace_bytes), partials_(partial_floats) {}

OpContext Resources::context() {
  OpContext ctx;
  ctx.stream = stream_.get();
  ctx.blas = blas_.get();
  ctx.lt = lt_.get();
  ctx.lt_workspace = workspace_.data();
  ctx.lt_workspace_bytes = workspace_.bytes();
  ctx.partials = partials_.data();
  ctx.partial_floats = partials_.size();
  ctx.use_lt = use_lt_;
  return ctx;
}

}  // namespace paci::cuda
