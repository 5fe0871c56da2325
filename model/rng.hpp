// SplitMix64 (Steele, Lea, Flood 2014): the one pseudo-random generator of paci::model, used for
// initialisation streams and data order. Ours, so the bits are the same on every platform
// (std:: distributions are implementation-defined).
#pragma once

#include <cstdint>

namespace paci::model {

struct SplitMix64 {
  std::uint64_t state = 0;
  // state += 0x9e3779b97f4a7c15, then the output mix.
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  std::uint64_t below(std::uint64_t n);  // uniform in [0, n) by rejection, n > 0
};

}  // namespace paci::model
