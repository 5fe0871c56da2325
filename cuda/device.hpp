// Finding a GPU (with the reason when there is none) and Resources: one stream with the cuBLAS and
// cuBLASLt handles bound to it, the Lt workspace and the column-sum scratch that every launcher of
// cuda/ops.hpp takes through an OpContext. A stage owns one; a test or benchmark makes its own.
#pragma once

#include <cstddef>
#include <string>

#include "cuda/memory.hpp"
#include "cuda/ops.hpp"

namespace paci::cuda {

// Number of CUDA devices; 0 when there is none or the runtime cannot reach a driver, with the
// runtime's explanation in *reason (e.g. "cudaErrorNoDevice: no CUDA-capable device is detected").
int device_count(std::string* reason = nullptr);
// "NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB)" for the current device.
std::string device_description();

inline constexpr std::size_t kLtWorkspaceBytes = std::size_t{32} << 20;  // Hopper wants 32 MiB

class Resources {
 public:
  // partial_floats: column-sum scratch, partial_floats(R, widest) of cuda/ops.hpp.
  explicit Resources(std::size_t partial_floats,
                     std::size_t lt_workspace_bytes = kLtWorkspaceBytes);

  OpContext context();
  cudaStream_t stream() const { return stream_.get(); }
  void synchronize() const { stream_.synchronize(); }
  // Route matmul_forward through cuBLASLt (default) or through the GEMM + kernel path.
  void set_use_lt(bool on) { use_lt_ = on; }

 private:
  Stream stream_;
  CublasHandle blas_;
  CublasLtHandle lt_;
  DeviceBuffer<unsigned char> workspace_;
  DeviceBuffer<float> partials_;
  bool use_lt_ = true;
};

}  // namespace paci::cuda
