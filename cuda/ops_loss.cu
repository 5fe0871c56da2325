// Fused softmax cross-entropy on the GPU: one block per row for the forward (max, sum of exp,
// probabilities in float, −log p[target]), a fixed-order mean of the losses in double, and the
// elementwise backward (probs − onehot)·dloss into the logits' precision.
#include <cmath>
#include <string>

#include "cuda/kernels.cuh"
#include "cuda/ops.hpp"

namespace paci::cuda {
namespace {

using kernels::block_reduce;
using kernels::from_float;
using kernels::grid_for;
using kernels::to_float;
using kernels::WarpMax;
using kernels::WarpSum;

constexpr unsigned kRowThreads = 512;
constexpr unsigned kThreads = 256;

template <typename floatX>
__global__ void crossentropy_forward_kernel(float* probs, float* losses, const floatX* logits,
                                            const std::int32_t* targets, std::size_t V,
                                            std::size_t ld) {
  __shared__ float shared[32];
  const std::size_t row = blockIdx.x;
  const floatX* z = logits + row * ld;  // the padding z[V..ld) is never read: masked
  float* p = probs + row * V;
  float zmax = -INFINITY;
  for (std::size_t v = threadIdx.x; v < V; v += blockDim.x) zmax = fmaxf(zmax, to_float(z[v]));
  zmax = block_reduce(zmax, shared, WarpMax{}, -INFINITY);
  float sum = 0.0f;
  for (std::size_t v = threadIdx.x; v < V; v += blockDim.x) {
    const float e = expf(to_float(z[v]) - zmax);
    p[v] = e;
    sum += e;
  }
  sum = block_reduce(sum, shared, WarpSum{}, 0.0f);
  const float inv = 1.0f / sum;
  for (std::size_t v = threadIdx.x; v < V; v += blockDim.x) p[v] *= inv;  // (X1) softmax
  if (threadIdx.x == 0) {
    const auto target = static_cast<std::size_t>(targets[row]);
    losses[row] = logf(sum) - (to_float(z[target]) - zmax);  // (X2) −log softmax[target]
  }
}

__global__ void mean_kernel(double* mean, const float* values, std::size_t n) {
  __shared__ double shared[32];
  double sum = 0.0;
  for (std::size_t i = threadIdx.x; i < n; i += blockDim.x) sum += static_cast<double>(values[i]);
  sum = block_reduce(sum, shared, WarpSum{}, 0.0);
  if (threadIdx.x == 0) *mean = sum / static_cast<double>(n);
}

// Differentiates (X2) through (X1): dlogits = (softmax − onehot(target))·dloss; the padding
// columns [V, ld) get zero, the gradient of logits that no loss reads.
template <typename floatX>
__global__ void crossentropy_backward_kernel(floatX* dlogits, const float* probs,
                                             const std::int32_t* targets, float dloss,
                                             std::size_t R, std::size_t V, std::size_t ld) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < R * ld;
       i += stride) {
    const std::size_t r = i / ld, v = i % ld;
    if (v >= V) {
      dlogits[i] = from_float<floatX>(0.0f);
      continue;
    }
    const float onehot = static_cast<std::size_t>(targets[r]) == v ? 1.0f : 0.0f;
    dlogits[i] = from_float<floatX>((probs[r * V + v] - onehot) * dloss);
  }
}

}  // namespace

template <typename floatX>
void crossentropy_forward(const OpContext& ctx, float* probs, float* losses, const floatX* logits,
                          const std::int32_t* targets, std::size_t R, std::size_t V,
                          std::size_t ld) {
  if (R == 0) return;
  PACI_CUDA_REQUIRE(R <= 0x7fffffffu, "too many rows for one grid: " + std::to_string(R));
  PACI_CUDA_REQUIRE(ld >= V, "logits row stride " + std::to_string(ld) + " below vocabulary " +
                                 std::to_string(V));
  crossentropy_forward_kernel<<<static_cast<unsigned>(R), kRowThreads, 0, ctx.stream>>>(
      probs, losses, logits, targets, V, ld);
  PACI_CUDA_CHECK_LAUNCH();
}

void mean_of(const OpContext& ctx, double* mean, const float* values, std::size_t n) {
  PACI_CUDA_REQUIRE(n > 0, "the mean of nothing");
  mean_kernel<<<1, 1024, 0, ctx.stream>>>(mean, values, n);
  PACI_CUDA_CHECK_LAUNCH();
}

template <typename floatX>
void crossentropy_backward(const OpContext& ctx, floatX* dlogits, const float* probs,
                           const std::int32_t* targets, float dloss, std::size_t R, std::size_t V,
                           std::size_t ld) {
  if (R * V == 0) return;
  PACI_CUDA_REQUIRE(ld >= V, "dlogits row stride " + std::to_string(ld) + " below vocabulary " +
                                 std::to_string(V));
  crossentropy_backward_kernel<<<grid_for(R * ld, kThreads), kThreads, 0, ctx.stream>>>(
      dlogits, probs, targets, dloss, R, V, ld);
  PACI_CUDA_CHECK_LAUNCH();
}

#define PACI_LOSS_INSTANTIATE(X)                                                                  \
  template void crossentropy_forward<X>(const OpContext&, float*, float*, const X*,               \
                                        const std::int32_t*, std::size_t, std::size_t,            \
                                        std::size_t);                                             \
  template void crossentropy_backward<X>(const OpContext&, X*, const float*, const std::int32_t*, \
                                         float, std::size_t, std::size_t, std::size_t);

PACI_LOSS_INSTANTIATE(float)
PACI_LOSS_INSTANTIATE(bf16)

}  // namespace paci::cuda
