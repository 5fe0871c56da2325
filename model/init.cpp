// InitRng (SplitMix64 + Box-Muller normals) and the per-tensor GPT-2 initialisation: every
// tensor's values depend only on (seed, name), never on which stage or in what order it is filled.
#include "model/init.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "model/check.hpp"

namespace paci::model {

double InitRng::uniform() {
  // (k + 0.5) / 2^53 with k in [0, 2^53): never 0, never 1.
  return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53;
}

double InitRng::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  const double radius = std::sqrt(-2.0 * std::log(uniform()));
  const double angle = 2.0 * std::numbers::pi * uniform();
  spare_ = radius * std::sin(angle);
  has_spare_ = true;
  return radius * std::cos(angle);
}

std::uint64_t tensor_stream_seed(std::uint64_t seed, std::string_view name) {
  std::uint64_t hash = 0xCBF29CE484222325ULL;  // FNV-1a 64
  for (char ch : name) {
    hash ^= static_cast<unsigned char>(ch);
    hash *= 0x100000001B3ULL;
  }
  InitRng mix(seed ^ hash);
  return mix.next();
}

void init_gpt2(const ParamLayout& layout, std::span<float> params, std::uint64_t seed) {
  PACI_MODEL_CHECK(params.size() == layout.size(), "buffer has {} floats, layout needs {}",
                   params.size(), layout.size());
  const double layers = static_cast<double>(layout.config().layers);
  const double residual_std = 0.02 / std::sqrt(2.0 * std::max(layers, 1.0));
  for (const ParamTensor& t : layout.tensors()) {
    float* p = params.data() + t.offset;
    switch (t.init) {
      case InitKind::ones:
        std::fill(p, p + t.numel, 1.0f);
        break;
      case InitKind::zeros:
        std::fill(p, p + t.numel, 0.0f);
        break;
      case InitKind::normal:
      case InitKind::residual_projection: {
        const double stddev = t.init == InitKind::normal ? 0.02 : residual_std;
        InitRng rng(tensor_stream_seed(seed, t.name));
        for (std::size_t i = 0; i < t.numel; ++i) p[i] = static_cast<float>(stddev * rng.normal());
        break;
      }
    }
  }
}

}  // namespace paci::model
