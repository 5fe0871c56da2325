// Deterministic synthetic tokens for executor tests (CPU and GPU): ids in [0, 64), a pure function
// of the micro-batch index, so every backend and schedule sees the same data.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace paci::exec::testing {

inline constexpr std::int32_t kSyntheticVocab = 64;

inline void synthetic(std::uint64_t index, std::span<std::int32_t> inputs,
                      std::span<std::int32_t> targets) {
  std::uint64_t state = 1000 + index;
  std::vector<std::int32_t> window(inputs.size() + 1);
  for (auto& t : window) {  // SplitMix64
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    t = static_cast<std::int32_t>((z ^ (z >> 31)) % kSyntheticVocab);
  }
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    inputs[i] = window[i];
    targets[i] = window[i + 1];
  }
}

}  // namespace paci::exec::testing
