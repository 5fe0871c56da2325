// Device helpers shared by the kernels (internal to cuda/, included by .cu files only): float ↔
// floatX conversion, warp and block reductions in a fixed order, and grid sizing.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>

#include "cuda/bf16.hpp"
#include "cuda/check.hpp"

namespace paci::cuda::kernels {

inline constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ float to_float(float x) {
  return x;
}
__device__ __forceinline__ float to_float(bf16 x) {
  return __bfloat162float(x);
}
template <typename floatX>
__device__ __forceinline__ floatX from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ bf16 from_float<bf16>(float x) {
  return __float2bfloat16_rn(x);
}

// Butterfly reductions: every lane ends with the same value, combined in the same order each run.
__device__ __forceinline__ float warp_sum(float x) {
  for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_xor_sync(kFullMask, x, offset);
  return x;
}
__device__ __forceinline__ float warp_max(float x) {
  for (int offset = 16; offset > 0; offset >>= 1)
    x = fmaxf(x, __shfl_xor_sync(kFullMask, x, offset));
  return x;
}
__device__ __forceinline__ double warp_sum(double x) {
  for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_xor_sync(kFullMask, x, offset);
  return x;
}

// Sum (or max) over a whole block of blockDim.x threads (a multiple of 32, at most 1024); every
// thread gets the result. `shared` holds 32 values; `neutral` fills the lanes past the block's warp
// count (0 for a sum, -inf for a max). Ends with a barrier, so it can be called again at once.
template <typename V, typename Op>
__device__ V block_reduce(V x, V* shared, Op op, V neutral) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  x = op(x);
  if (lane == 0) shared[warp] = x;
  __syncthreads();
  V total = lane < warps ? shared[lane] : neutral;
  total = op(total);  // warp 0..n each combine the per-warp values in the same order
  __syncthreads();
  return total;
}

struct WarpSum {
  __device__ float operator()(float x) const { return warp_sum(x); }
  __device__ double operator()(double x) const { return warp_sum(x); }
};
struct WarpMax {
  __device__ float operator()(float x) const { return warp_max(x); }
};

// Blocks for a grid-stride loop over n elements, capped so that huge tensors still fit a grid.
inline unsigned grid_for(std::size_t n, unsigned threads) {
  const std::size_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(std::max<std::size_t>(1, std::min<std::size_t>(blocks, 65535 * 8)));
}

}  // namespace paci::cuda::kernels
