// The optimizer and gradient-buffer kernels. AdamW spells every operation with an _rn intrinsic so
// nvcc cannot contract it into an FMA: with IEEE sqrt and division that is the CPU's arithmetic.
#include <cuda_runtime.h>

#include "cuda/kernels.cuh"
#include "cuda/optimizer.hpp"

namespace paci::cuda {
namespace {

using kernels::block_reduce;
using kernels::grid_for;
using kernels::WarpSum;

constexpr unsigned kThreads = 256;
constexpr unsigned kNormBlocks = SquaredNorm::kBlocks;

__device__ int decay_of(const DecayRun* runs, std::size_t run_count, std::size_t i) {
  std::size_t lo = 0, hi = run_count;  // the last run whose offset ≤ i
  while (hi - lo > 1) {
    const std::size_t mid = (lo + hi) / 2;
    if (runs[mid].offset <= i) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return runs[lo].decays;
}

__global__ void adamw_kernel(float* params, const float* grads, float* m, float* v, bf16* copy,
                             const DecayRun* runs, std::size_t run_count, std::size_t n,
                             AdamWScalars s) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    const float run_decay = decay_of(runs, run_count, i) != 0 ? s.decay : 1.0f;
    const float grad = __fmul_rn(grads[i], s.grad_scale);
    const float decayed = __fmul_rn(params[i], run_decay);  // param.mul_(1 − lr·wd)
    const float mi = __fadd_rn(__fmul_rn(m[i], s.beta1), __fmul_rn(grad, s.one_minus_beta1));
    const float vi =
        __fadd_rn(__fmul_rn(v[i], s.beta2), __fmul_rn(__fmul_rn(s.one_minus_beta2, grad), grad));
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), s.bias_correction2_sqrt), s.eps);
    const float p = __fadd_rn(decayed, __fmul_rn(-s.step_size, __fdiv_rn(mi, denom)));
    m[i] = mi;
    v[i] = vi;
    params[i] = p;
    if (copy != nullptr) copy[i] = __float2bfloat16_rn(p);
  }
}

__global__ void accumulate_kernel(float* dst, const float* src, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    dst[i] += src[i];
  }
}

__global__ void scale_kernel(float* values, std::size_t n, float factor) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    values[i] *= factor;
  }
}

template <typename To, typename From>
__global__ void cast_kernel(To* dst, const From* src, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    if constexpr (sizeof(To) == sizeof(float)) {
      dst[i] = __bfloat162float(src[i]);
    } else {
      dst[i] = __float2bfloat16_rn(src[i]);
    }
  }
}

// Block b sums its fixed slice [b·chunk, (b+1)·chunk) of x²; then one block sums the partials.
__global__ void squared_norm_partials_kernel(double* partials, const float* values, std::size_t n) {
  __shared__ double shared[32];
  const std::size_t chunk = (n + gridDim.x - 1) / gridDim.x;
  const std::size_t begin = blockIdx.x * chunk;
  const std::size_t end = begin + chunk < n ? begin + chunk : n;
  double sum = 0.0;
  for (std::size_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const double x = values[i];
    sum += x * x;
  }
  sum = block_reduce(sum, shared, WarpSum{}, 0.0);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

__global__ void sum_partials_kernel(double* result, const double* partials, std::size_t count) {
  __shared__ double shared[32];
  double sum = 0.0;
  for (std::size_t i = threadIdx.x; i < count; i += blockDim.x) sum += partials[i];
  sum = block_reduce(sum, shared, WarpSum{}, 0.0);
  if (threadIdx.x == 0) *result = sum;
}

}  // namespace

void adamw_update(cudaStream_t stream, float* params, const float* grads, float* m, float* v,
                  bf16* compute_copy, const DecayRun* runs, std::size_t run_count, std::size_t n,
                  const AdamWScalars& scalars) {
  if (n == 0) return;
  PACI_CUDA_REQUIRE(run_count > 0, "AdamW over a layout without tensors");
  adamw_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(params, grads, m, v, compute_copy,
                                                               runs, run_count, n, scalars);
  PACI_CUDA_CHECK_LAUNCH();
}

void accumulate(cudaStream_t stream, float* dst, const float* src, std::size_t n) {
  if (n == 0) return;
  accumulate_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(dst, src, n);
  PACI_CUDA_CHECK_LAUNCH();
}

void scale(cudaStream_t stream, float* values, std::size_t n, float factor) {
  if (n == 0) return;
  scale_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(values, n, factor);
  PACI_CUDA_CHECK_LAUNCH();
}

void zero(cudaStream_t stream, float* values, std::size_t n) {
  if (n == 0) return;
  PACI_CUDA_CHECK(cudaMemsetAsync(values, 0, n * sizeof(float), stream));
}

void cast(cudaStream_t stream, bf16* dst, const float* src, std::size_t n) {
  if (n == 0) return;
  cast_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(dst, src, n);
  PACI_CUDA_CHECK_LAUNCH();
}

void cast(cudaStream_t stream, float* dst, const bf16* src, std::size_t n) {
  if (n == 0) return;
  cast_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(dst, src, n);
  PACI_CUDA_CHECK_LAUNCH();
}

double SquaredNorm::operator()(cudaStream_t stream, const float* values, std::size_t n) {
  if (n == 0) return 0.0;
  squared_norm_partials_kernel<<<kNormBlocks, 512, 0, stream>>>(partials_.data(), values, n);
  PACI_CUDA_CHECK_LAUNCH();
  sum_partials_kernel<<<1, 1024, 0, stream>>>(partials_.data() + kNormBlocks, partials_.data(),
                                              kNormBlocks);
  PACI_CUDA_CHECK_LAUNCH();
  PACI_CUDA_CHECK(cudaMemcpyAsync(result_.data(), partials_.data() + kNormBlocks, sizeof(double),
                                  cudaMemcpyDeviceToHost, stream));
  PACI_CUDA_CHECK(cudaStreamSynchronize(stream));
  return result_[0];
}

}  // namespace paci::cuda
