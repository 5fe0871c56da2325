// Contiguous layer partitioning: exact min-max over forward FLOPs by dynamic programming
// (L and P are small: O(P·L²)).
#include "exec/partition.hpp"

#include <fmt/format.h>
#include <charconv>
#include <limits>

#include "schedules/ir.hpp"

namespace paci::exec {

namespace {

void check_counts(const model::GptConfig& config, std::size_t stages) {
  if (stages == 0) throw InputError("the pipeline needs at least one stage");
  if (stages > config.layers)
    throw InputError(
        fmt::format("{} stages but only {} transformer blocks: every stage needs at "
                    "least one block (use fewer stages or more --layers)",
                    stages, config.layers));
}

}  // namespace

std::vector<model::StageRange> balanced_partition(const model::GptConfig& config, std::size_t P,
                                                  std::size_t batch, std::size_t seq_len) {
  check_counts(config, P);
  const std::size_t L = config.layers;
  // cost(a, b): forward FLOPs of the stage owning blocks [a, b).
  auto cost = [&](std::size_t a, std::size_t b) {
    return model::stage_flops(config, {a, b - a}, batch, seq_len).forward();
  };
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // best[p][l]: the smallest possible slowest-stage cost covering blocks [0, l) with p stages.
  std::vector<std::vector<double>> best(P + 1, std::vector<double>(L + 1, kInf));
  std::vector<std::vector<std::size_t>> cut(P + 1, std::vector<std::size_t>(L + 1, 0));
  best[0][0] = 0.0;
  for (std::size_t p = 1; p <= P; ++p)
    for (std::size_t l = p; l <= L; ++l)
      for (std::size_t a = p - 1; a < l; ++a) {
        const double candidate = std::max(best[p - 1][a], cost(a, l));
        // Ties: prefer the cut that makes this stage's size closest to an even share.
        const bool better =
            candidate < best[p][l] ||
            (candidate == best[p][l] &&
             std::abs(static_cast<double>(l - a) - static_cast<double>(L) / P) <
                 std::abs(static_cast<double>(l - cut[p][l]) - static_cast<double>(L) / P));
        if (better) {
          best[p][l] = candidate;
          cut[p][l] = a;
        }
      }
  std::vector<model::StageRange> ranges(P);
  std::size_t end = L;
  for (std::size_t p = P; p >= 1; --p) {
    const std::size_t begin = cut[p][end];
    ranges[p - 1] = {begin, end - begin};
    end = begin;
  }
  return ranges;
}

std::vector<model::StageRange> explicit_partition(const model::GptConfig& config, std::size_t P,
                                                  std::string_view text) {
  check_counts(config, P);
  std::vector<model::StageRange> ranges;
  std::size_t first = 0, start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view item = text.substr(start, comma - start);
    std::size_t blocks = 0;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), blocks);
    if (ec != std::errc() || ptr != item.data() + item.size() || blocks == 0)
      throw InputError(fmt::format("--partition: '{}' is not a positive block count", item));
    ranges.push_back({first, blocks});
    first += blocks;
    start = comma + 1;
  }
  if (ranges.size() != P)
    throw InputError(
        fmt::format("--partition lists {} stages, the schedule has {}", ranges.size(), P));
  if (first != config.layers)
    throw InputError(
        fmt::format("--partition adds up to {} blocks, the model has {}", first, config.layers));
  return ranges;
}

}  // namespace paci::exec
