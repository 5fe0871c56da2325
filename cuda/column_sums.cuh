// Deterministic column sums over R rows (internal to cuda/): each chunk of kPartialRows rows sums
// its columns into ctx.partials in a fixed order, then one pass adds the chunks, in chunk order, to
// the destination (+=). No atomics: the same bits every run. Used for bias and LayerNorm gradients.
#pragma once

#include <string>

#include "cuda/kernels.cuh"
#include "cuda/ops.hpp"

namespace paci::cuda::kernels {

inline constexpr unsigned kColumnTile = 32;  // columns per block (one warp-wide row segment)
inline constexpr unsigned kRowLanes = 8;     // rows a block reads at once

// F adds row r's terms of column c to s[0..kSums): __device__ void operator()(r, c, float* s).
template <int kSums, typename F>
__global__ void column_partials_kernel(F f, std::size_t R, std::size_t C, float* partials) {
  const std::size_t c = blockIdx.x * kColumnTile + threadIdx.x;
  const std::size_t chunk = blockIdx.y;
  const std::size_t r0 = chunk * kPartialRows;
  const std::size_t r1 = r0 + kPartialRows < R ? r0 + kPartialRows : R;
  float s[kSums] = {};
  if (c < C) {
    for (std::size_t r = r0 + threadIdx.y; r < r1; r += kRowLanes) f(r, c, s);
  }
  __shared__ float shared[kSums][kRowLanes][kColumnTile + 1];
  for (int k = 0; k < kSums; ++k) shared[k][threadIdx.y][threadIdx.x] = s[k];
  __syncthreads();
  if (threadIdx.y != 0 || c >= C) return;
  for (int k = 0; k < kSums; ++k) {
    float total = 0.0f;
    for (unsigned y = 0; y < kRowLanes; ++y) total += shared[k][y][threadIdx.x];
    partials[(chunk * kSums + k) * C + c] = total;
  }
}

template <int kSums>
__global__ void column_finish_kernel(const float* partials, std::size_t chunks, std::size_t C,
                                     float* dst0, float* dst1) {
  const std::size_t c = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (c >= C) return;
  for (int k = 0; k < kSums; ++k) {
    float total = 0.0f;  // this call's sum first, then one add (as the CPU backend does)
    for (std::size_t chunk = 0; chunk < chunks; ++chunk)
      total += partials[(chunk * kSums + k) * C + c];
    float* dst = k == 0 ? dst0 : dst1;
    dst[c] += total;
  }
}

// dst0[c] += Σ_r term0(r, c) (and dst1 for the second sum when kSums == 2).
template <int kSums, typename F>
void column_sums(const OpContext& ctx, F f, std::size_t R, std::size_t C, float* dst0,
                 float* dst1 = nullptr) {
  static_assert(kSums == 1 || kSums == 2);
  if (R == 0 || C == 0) return;
  const std::size_t chunks = (R + kPartialRows - 1) / kPartialRows;
  PACI_CUDA_REQUIRE(chunks * kSums * C <= ctx.partial_floats,
                    "column sums of (" + std::to_string(R) + ", " + std::to_string(C) + ") need " +
                        std::to_string(chunks * kSums * C) + " scratch floats, the context has " +
                        std::to_string(ctx.partial_floats));
  PACI_CUDA_REQUIRE(chunks <= 65535, "too many rows for one grid: " + std::to_string(R));
  const dim3 grid(static_cast<unsigned>((C + kColumnTile - 1) / kColumnTile),
                  static_cast<unsigned>(chunks));
  column_partials_kernel<kSums>
      <<<grid, dim3(kColumnTile, kRowLanes), 0, ctx.stream>>>(f, R, C, ctx.partials);
  PACI_CUDA_CHECK_LAUNCH();
  column_finish_kernel<kSums><<<static_cast<unsigned>((C + 255) / 256), 256, 0, ctx.stream>>>(
      ctx.partials, chunks, C, dst0, dst1);
  PACI_CUDA_CHECK_LAUNCH();
}

}  // namespace paci::cuda::kernels
