// The CUDA backend's error type and check macros: a failed CUDA, cuBLAS or NCCL call throws
// CudaError whose message names the file, the line, the failing expression and the library's own
// error string. Host-only; usable from .cpp and .cu files alike (no fmt, nothing but the CUDA
// headers).
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace paci::cuda {

struct CudaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// "<file>:<line>: <library> error <code>: <text> in <expression>"
[[noreturn]] inline void fail_call(const char* file, int line, const char* library, int code,
                                   const std::string& text, const char* expression) {
  throw CudaError(std::string(file) + ":" + std::to_string(line) + ": " + library + " error " +
                  std::to_string(code) + ": " + text + " in " + expression);
}

// A launcher's precondition (scratch too small, a dimension past what cuBLAS takes).
[[noreturn]] inline void fail_require(const char* file, int line, const char* condition,
                                      const std::string& message) {
  throw CudaError(std::string(file) + ":" + std::to_string(line) + ": check failed: " + condition +
                  ": " + message);
}

inline void check_cuda(cudaError_t status, const char* file, int line, const char* expression) {
  if (status != cudaSuccess) {
    fail_call(file, line, "CUDA", static_cast<int>(status),
              std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status),
              expression);
  }
}

inline void check_cublas(cublasStatus_t status, const char* file, int line,
                         const char* expression) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    fail_call(file, line, "cuBLAS", static_cast<int>(status), cublasGetStatusString(status),
              expression);
  }
}

}  // namespace paci::cuda

// PACI_CUDA_CHECK(cudaMalloc(&p, bytes));  PACI_CUBLAS_CHECK(cublasCreate(&handle));
// cuBLASLt calls return cublasStatus_t too: PACI_CUBLAS_CHECK(cublasLtMatmul(...)).
#define PACI_CUDA_CHECK(call) ::paci::cuda::check_cuda((call), __FILE__, __LINE__, #call)
#define PACI_CUBLAS_CHECK(call) ::paci::cuda::check_cublas((call), __FILE__, __LINE__, #call)
// After a kernel launch: reports a bad launch configuration at the launch site.
#define PACI_CUDA_CHECK_LAUNCH() PACI_CUDA_CHECK(cudaGetLastError())
// PACI_CUDA_REQUIRE(n <= capacity, "scratch holds " + std::to_string(capacity) + " floats");
#define PACI_CUDA_REQUIRE(condition, message)                                \
  do {                                                                       \
    if (!(condition)) {                                                      \
      ::paci::cuda::fail_require(__FILE__, __LINE__, #condition, (message)); \
    }                                                                        \
  } while (false)
