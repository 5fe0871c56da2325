// AdamW's host side: the decay runs of a layout (uploaded once), the per-step scalars exactly as
// model::AdamW computes them, and the squared norm's final copy back to the host.
#include "cuda/optimizer.hpp"

#include <cmath>
#include <vector>

#include "model/check.hpp"

namespace paci::cuda {

SquaredNorm::SquaredNorm() : partials_(kBlocks + 1), result_(1) {}

AdamW::AdamW(const model::ParamLayout& layout, model::AdamWConfig config)
    : config_(config), m_(layout.size()), v_(layout.size()) {
  PACI_MODEL_CHECK(config.beta1 >= 0 && config.beta1 < 1, "beta1 {} not in [0, 1)", config.beta1);
  PACI_MODEL_CHECK(config.beta2 >= 0 && config.beta2 < 1, "beta2 {} not in [0, 1)", config.beta2);
  PACI_MODEL_CHECK(config.eps >= 0, "eps {} is negative", config.eps);
  PACI_MODEL_CHECK(config.weight_decay >= 0, "weight decay {} is negative", config.weight_decay);
  std::vector<DecayRun> runs;
  for (const model::ParamTensor& t : layout.tensors()) {
    if (!runs.empty() && (runs.back().decays != 0) == t.decays()) {
      runs.back().numel += t.numel;
    } else {
      runs.push_back({t.offset, t.numel, t.decays() ? 1 : 0});
    }
  }
  runs_ = DeviceBuffer<DecayRun>(runs.size());
  Stream stream;
  copy_to_device(stream.get(), runs_.data(), std::span<const DecayRun>(runs));
  PACI_CUDA_CHECK(cudaMemsetAsync(m_.data(), 0, m_.bytes(), stream.get()));
  PACI_CUDA_CHECK(cudaMemsetAsync(v_.data(), 0, v_.bytes(), stream.get()));
  stream.synchronize();
}

void AdamW::step(cudaStream_t stream, float* params, const float* grads, double lr,
                 float grad_scale, bf16* compute_copy) {
  ++steps_;
  const double t = static_cast<double>(steps_);
  AdamWScalars s;  // model::AdamW::step's casts, one by one
  s.beta1 = static_cast<float>(config_.beta1);
  s.beta2 = static_cast<float>(config_.beta2);
  s.one_minus_beta1 = static_cast<float>(1 - config_.beta1);
  s.one_minus_beta2 = static_cast<float>(1 - config_.beta2);
  s.decay = static_cast<float>(1 - lr * config_.weight_decay);
  s.step_size = static_cast<float>(lr / (1 - std::pow(config_.beta1, t)));
  s.bias_correction2_sqrt = static_cast<float>(std::sqrt(1 - std::pow(config_.beta2, t)));
  s.eps = static_cast<float>(config_.eps);
  s.grad_scale = grad_scale;
  adamw_update(stream, params, grads, m_.data(), v_.data(), compute_copy, runs_.data(),
               runs_.size(), m_.size(), s);
}

}  // namespace paci::cuda
