// The host half of the encoder backward: grouping a micro-batch's rows by token (sort of
// (token, row) keys, so rows stay in order within a token) for the atomic-free dwte kernel.
#include <algorithm>

#include "cuda/check.hpp"
#include "cuda/ops.hpp"

namespace paci::cuda {

std::size_t group_tokens(std::span<const std::int32_t> tokens, std::span<std::uint64_t> keys,
                         std::span<std::int32_t> rows, std::span<std::int32_t> starts,
                         std::span<std::int32_t> group_tokens) {
  const std::size_t R = tokens.size();
  PACI_CUDA_REQUIRE(
      keys.size() >= R && rows.size() >= R && starts.size() >= R + 1 && group_tokens.size() >= R,
      "group_tokens needs R, R, R + 1 and R elements of scratch");
  for (std::size_t r = 0; r < R; ++r) {
    keys[r] = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(tokens[r])) << 32) | r;
  }
  std::sort(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(R));
  std::size_t groups = 0;
  for (std::size_t i = 0; i < R; ++i) {
    const auto token = static_cast<std::int32_t>(keys[i] >> 32);
    rows[i] = static_cast<std::int32_t>(keys[i] & 0xffffffffu);
    if (i == 0 || token != group_tokens[groups - 1]) {
      group_tokens[groups] = token;
      starts[groups] = static_cast<std::int32_t>(i);
      ++groups;
    }
  }
  starts[groups] = static_cast<std::int32_t>(R);
  return groups;
}

}  // namespace paci::cuda
