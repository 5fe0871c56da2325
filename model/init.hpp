// Deterministic GPT-2 initialisation. Each tensor draws from its own random stream derived from
// (seed, tensor name), so a stage initialised on its own gets bitwise the same values as the same
// tensors of the whole model. The generator and the normal transform are ours (portable bits).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "model/layout.hpp"
#include "model/rng.hpp"

namespace paci::model {

// The initialisation stream: SplitMix64 (model/rng.hpp) with Box-Muller normals. Data order uses
// its own SplitMix64 streams; the two never share one.
class InitRng {
 public:
  explicit InitRng(std::uint64_t seed) : rng_{seed} {}
  std::uint64_t next() { return rng_.next(); }
  double uniform();  // in (0, 1), 53 random bits
  double normal();   // N(0, 1), Box-Muller; std::normal_distribution is implementation-defined

 private:
  SplitMix64 rng_;
  double spare_ = 0;
  bool has_spare_ = false;
};

// The stream of one tensor: a hash of the name (FNV-1a) mixed with the seed.
std::uint64_t tensor_stream_seed(std::uint64_t seed, std::string_view name);

// Fills params (layout.size() floats) with GPT-2's initialisation:
//   weights N(0, 0.02); attention and MLP output projections N(0, 0.02/√(2·L));
//   wpe N(0, 0.02) (HF/nanoGPT; llm.c's Python init uses the same for wpe);
//   biases 0; LayerNorm gains 1, LayerNorm biases 0.
void init_gpt2(const ParamLayout& layout, std::span<float> params, std::uint64_t seed);

}  // namespace paci::model
