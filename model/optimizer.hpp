// AdamW with PyTorch's semantics over one stage's parameter buffer, the learning-rate schedule
// (linear warm-up, then cosine to a floor or constant), and gradient-buffer utilities (squared norm
// for global clipping, scale, zero). Elementwise and fixed-order: no thread count changes a bit.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "model/layout.hpp"

namespace paci::model {

// Hyperparameters in double, as PyTorch holds them (Python floats); each step casts its scalars.
struct AdamWConfig {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;  // decoupled: p −= lr·wd·p, on tensors of ≥ 2 dimensions only
  // Throws ModelError on betas outside [0, 1), or a negative or non-finite eps or decay.
  void validate() const;
};

class AdamW {
 public:
  // Zero moments, step count 0. Throws ModelError where config.validate() does.
  explicit AdamW(const ParamLayout& layout, AdamWConfig config = {}, std::size_t threads = 1);

  // One update with learning rate lr of every parameter, as torch.optim.AdamW (foreach=False):
  //   t += 1;  p *= 1 − lr·wd (decaying tensors);  m = β1·m + (1−β1)·g;  v = β2·v + (1−β2)·g²;
  //   p −= lr/(1−β1^t) · m / (√v / √(1−β2^t) + ε),   with g = grad_scale·grads.
  // grad_scale applies a clipping coefficient (clip_coefficient) without touching grads.
  void step(std::span<float> params, std::span<const float> grads, double lr,
            float grad_scale = 1.0f);

  std::size_t steps() const { return steps_; }
  const AdamWConfig& config() const { return config_; }
  void set_threads(std::size_t threads);

  // Optimizer state, for checkpoints: moments in the stage's ParamLayout, and the step count.
  std::span<float> first_moment() { return m_; }
  std::span<float> second_moment() { return v_; }
  std::span<const float> first_moment() const { return m_; }
  std::span<const float> second_moment() const { return v_; }
  void set_steps(std::size_t steps) { steps_ = steps; }

 private:
  struct Run {  // consecutive tensors with the same decay rule
    std::size_t offset = 0, numel = 0;
    bool decays = false;
  };
  AdamWConfig config_;
  std::size_t threads_ = 1;
  std::vector<Run> runs_;
  std::vector<float> m_, v_;
  std::size_t steps_ = 0;
};

enum class LrDecay { cosine, constant };

// Learning rate of optimizer step `step` (counted from 0), llm.c's schedule:
//   step < warmup_steps:  max_lr·(step + 1)/warmup_steps
//   constant:             max_lr
//   cosine:               min_lr + ½(1 + cos(π·r))·(max_lr − min_lr), r = (step − warmup)/(total −
//                         warmup), and min_lr from total_steps on.
struct LrSchedule {
  double max_lr = 3e-4;
  double min_lr = 3e-5;
  std::size_t warmup_steps = 0;
  std::size_t total_steps = 1;
  LrDecay decay = LrDecay::cosine;

  void validate() const;  // throws ModelError
  double at(std::size_t step) const;
};

// Σ x² in double, in a fixed order. A trainer sums this over stages, takes the square root and
// passes clip_coefficient() to AdamW::step; one stage alone can only clip by its own norm.
double squared_norm(std::span<const float> values);
// torch.nn.utils.clip_grad_norm_: min(1, max_norm / (√total_squared_norm + 1e-6)).
float clip_coefficient(double total_squared_norm, double max_norm);
void scale(std::span<float> values, float factor);
void zero(std::span<float> values);  // zero_grad

}  // namespace paci::model
