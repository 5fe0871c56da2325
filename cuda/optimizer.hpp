// AdamW on the GPU with PyTorch's semantics (model/optimizer.hpp's operation order, so fp32 gives
// the CPU's bits), fp32 master weights and moments, an optional bf16 compute copy written in the
// same pass; and the gradient-buffer utilities: accumulate (+=), scale, zero, cast, squared norm.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "cuda/bf16.hpp"
#include "cuda/memory.hpp"
#include "model/layout.hpp"
#include "model/optimizer.hpp"

namespace paci::cuda {

// Consecutive tensors of a ParamLayout with the same decay rule (decay on ≥ 2-D tensors only).
struct DecayRun {
  std::size_t offset = 0, numel = 0;
  int decays = 0;
};

// One step's scalars, computed in double on the host and cast to float as torch does.
struct AdamWScalars {
  float beta1 = 0, beta2 = 0, one_minus_beta1 = 0, one_minus_beta2 = 0;
  float decay = 1;      // 1 − lr·wd, applied on decaying runs
  float step_size = 0;  // lr / (1 − β1^t)
  float bias_correction2_sqrt = 1;
  float eps = 0;
  float grad_scale = 1;
};

// ---- launchers (asynchronous on `stream`) -------------------------------------------------------
// params, m, v updated in place over n floats; runs (device, run_count) cover [0, n) in order.
// compute_copy (n bf16, may be null) receives the updated weights cast to bf16.
void adamw_update(cudaStream_t stream, float* params, const float* grads, float* m, float* v,
                  bf16* compute_copy, const DecayRun* runs, std::size_t run_count, std::size_t n,
                  const AdamWScalars& scalars);
void accumulate(cudaStream_t stream, float* dst, const float* src, std::size_t n);  // dst += src
void scale(cudaStream_t stream, float* values, std::size_t n, float factor);
void zero(cudaStream_t stream, float* values, std::size_t n);
void cast(cudaStream_t stream, bf16* dst, const float* src, std::size_t n);  // round to nearest
void cast(cudaStream_t stream, float* dst, const bf16* src, std::size_t n);

// Σ x² of a device buffer in double, in a fixed order (a pure function of n and the values).
class SquaredNorm {
 public:
  static constexpr std::size_t kBlocks = 1024;  // fixed partial sums, whatever n is
  SquaredNorm();
  // Waits for the stream, so the result is the gradients' norm after all work queued on it.
  double operator()(cudaStream_t stream, const float* values, std::size_t n);

 private:
  DeviceBuffer<double> partials_;
  PinnedBuffer<double> result_;
};

class AdamW {
 public:
  // Zero moments on the device, step count 0. Throws model::ModelError on a bad config.
  explicit AdamW(const model::ParamLayout& layout, model::AdamWConfig config = {});

  // One update of params (layout.size() floats, device) from grads, as model::AdamW::step; with
  // compute_copy, also writes the new weights in bf16 (the copy a bf16 stage computes with).
  void step(cudaStream_t stream, float* params, const float* grads, double lr,
            float grad_scale = 1.0f, bf16* compute_copy = nullptr);

  std::size_t steps() const { return steps_; }
  void set_steps(std::size_t steps) { steps_ = steps; }
  const model::AdamWConfig& config() const { return config_; }
  std::size_t size() const { return m_.size(); }
  // Moments in the stage's ParamLayout (device), for checkpoints.
  float* first_moment() { return m_.data(); }
  float* second_moment() { return v_.data(); }
  const float* first_moment() const { return m_.data(); }
  const float* second_moment() const { return v_.data(); }

 private:
  model::AdamWConfig config_;
  DeviceBuffer<DecayRun> runs_;
  DeviceBuffer<float> m_, v_;
  std::size_t steps_ = 0;
};

}  // namespace paci::cuda
