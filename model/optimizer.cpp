// AdamW update (PyTorch's operation order, scalars cast from double as torch does), the LR
// schedule and gradient-buffer utilities. Every loop is elementwise or runs in index order.
#include "model/optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "model/check.hpp"

namespace paci::model {

void AdamWConfig::validate() const {
  PACI_MODEL_CHECK(beta1 >= 0 && beta1 < 1, "beta1 {} not in [0, 1)", beta1);
  PACI_MODEL_CHECK(beta2 >= 0 && beta2 < 1, "beta2 {} not in [0, 1)", beta2);
  PACI_MODEL_CHECK(std::isfinite(eps) && eps >= 0, "eps {} is not a finite number >= 0", eps);
  PACI_MODEL_CHECK(std::isfinite(weight_decay) && weight_decay >= 0,
                   "weight decay {} is not a finite number >= 0", weight_decay);
}

AdamW::AdamW(const ParamLayout& layout, AdamWConfig config, std::size_t threads)
    : config_(config), m_(layout.size(), 0.0f), v_(layout.size(), 0.0f) {
  config.validate();
  set_threads(threads);
  for (const ParamTensor& t : layout.tensors()) {
    if (!runs_.empty() && runs_.back().decays == t.decays()) {
      runs_.back().numel += t.numel;
    } else {
      runs_.push_back({t.offset, t.numel, t.decays()});
    }
  }
}

void AdamW::set_threads(std::size_t threads) {
  PACI_MODEL_CHECK(threads > 0, "AdamW needs at least one thread");
  threads_ = threads;
}

void AdamW::step(std::span<float> params, std::span<const float> grads, double lr,
                 float grad_scale) {
  PACI_MODEL_CHECK(params.size() == m_.size() && grads.size() == m_.size(),
                   "AdamW over {} floats got params {} and grads {}", m_.size(), params.size(),
                   grads.size());
  ++steps_;
  const double t = static_cast<double>(steps_);
  // Scalars exactly as torch computes them in Python (double) and hands them to float kernels.
  const auto b1 = static_cast<float>(config_.beta1);
  const auto b2 = static_cast<float>(config_.beta2);
  const auto one_minus_b1 = static_cast<float>(1 - config_.beta1);
  const auto one_minus_b2 = static_cast<float>(1 - config_.beta2);
  const auto decay = static_cast<float>(1 - lr * config_.weight_decay);
  const auto step_size = static_cast<float>(lr / (1 - std::pow(config_.beta1, t)));
  const auto bc2_sqrt = static_cast<float>(std::sqrt(1 - std::pow(config_.beta2, t)));
  const auto eps = static_cast<float>(config_.eps);
  float* p = params.data();
  const float* g = grads.data();
  float* m = m_.data();
  float* v = v_.data();
  const int team = static_cast<int>(threads_);
  for (const Run& run : runs_) {
    const float run_decay = run.decays ? decay : 1.0f;
    const std::size_t end = run.offset + run.numel;
#pragma omp parallel for simd num_threads(team) if (parallel : threads_ > 1) schedule(static)
    for (std::size_t i = run.offset; i < end; ++i) {
      const float grad = g[i] * grad_scale;
      const float decayed = p[i] * run_decay;                // param.mul_(1 − lr·wd)
      m[i] = m[i] * b1 + grad * one_minus_b1;                // exp_avg.mul_(β1).add_(g, 1 − β1)
      v[i] = v[i] * b2 + one_minus_b2 * grad * grad;         // exp_avg_sq.mul_(β2).addcmul_(g, g)
      const float denom = std::sqrt(v[i]) / bc2_sqrt + eps;  // (√v / √bc2).add_(ε)
      p[i] = decayed + -step_size * (m[i] / denom);          // param.addcdiv_(m, denom, −step)
    }
  }
}

void LrSchedule::validate() const {
  PACI_MODEL_CHECK(std::isfinite(max_lr) && std::isfinite(min_lr) && max_lr >= 0 && min_lr >= 0,
                   "learning rates must be finite and non-negative (lr {}, min_lr {})", max_lr,
                   min_lr);
  PACI_MODEL_CHECK(min_lr <= max_lr, "min_lr {} exceeds max_lr {}", min_lr, max_lr);
}

double LrSchedule::at(std::size_t step) const {
  if (step < warmup_steps) {
    return max_lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  }
  if (decay == LrDecay::constant) return max_lr;
  if (step >= total_steps) return min_lr;
  const double ratio =
      static_cast<double>(step - warmup_steps) / static_cast<double>(total_steps - warmup_steps);
  const double coeff = 0.5 * (1.0 + std::cos(std::numbers::pi * ratio));
  return min_lr + coeff * (max_lr - min_lr);
}

double squared_norm(std::span<const float> values) {
  double acc[4] = {0, 0, 0, 0};
  std::size_t i = 0;
  for (; i + 4 <= values.size(); i += 4) {
    for (std::size_t j = 0; j < 4; ++j) {
      const double x = values[i + j];
      acc[j] += x * x;
    }
  }
  double sum = (acc[0] + acc[1]) + (acc[2] + acc[3]);
  for (; i < values.size(); ++i) sum += static_cast<double>(values[i]) * values[i];
  return sum;
}

float clip_coefficient(double total_squared_norm, double max_norm) {
  PACI_MODEL_CHECK(max_norm > 0, "clipping norm {} must be positive", max_norm);
  const double coefficient = max_norm / (std::sqrt(total_squared_norm) + 1e-6);
  return static_cast<float>(std::min(1.0, coefficient));
}

void scale(std::span<float> values, float factor) {
  for (float& x : values) x *= factor;
}

void zero(std::span<float> values) {
  std::fill(values.begin(), values.end(), 0.0f);
}

}  // namespace paci::model
