// The token loader's window rules, the platform-independent shuffle, the validation pass and the
// train/validation split. See model/data.hpp and docs/data.md.
#include "model/data.hpp"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <limits>
#include <mutex>

#include "model/check.hpp"

namespace paci::model {

std::string_view to_string(DataOrder order) {
  return order == DataOrder::sequential ? "sequential" : "shuffled";
}

DataOrder parse_data_order(std::string_view text) {
  if (text == "sequential") return DataOrder::sequential;
  if (text == "shuffled") return DataOrder::shuffled;
  throw InputError(fmt::format("unknown data order '{}' (sequential | shuffled)", text));
}

std::uint64_t SplitMix64::below(std::uint64_t n) {
  PACI_MODEL_CHECK(n > 0, "empty range");
  // Reject the lowest 2^64 mod n values so that every residue is equally likely.
  const std::uint64_t threshold = (0 - n) % n;
  while (true) {
    const std::uint64_t r = next();
    if (r >= threshold) return r % n;
  }
}

std::vector<std::size_t> epoch_permutation(std::uint64_t seed, std::uint64_t epoch, std::size_t n) {
  const std::uint64_t seed_mix = SplitMix64{seed}.next();
  SplitMix64 rng{SplitMix64{seed_mix ^ epoch}.next()};
  std::vector<std::size_t> permutation(n);
  for (std::size_t i = 0; i < n; ++i) permutation[i] = i;
  for (std::size_t j = n; j-- > 1;) std::swap(permutation[j], permutation[rng.below(j + 1)]);
  return permutation;
}

// The permutation of the two most recently used (epoch, W) pairs: pipeline stages read the same
// micro-batch at different times, so two epochs can be in use at once near a boundary.
struct TokenData::Cache {
  struct Entry {
    std::uint64_t epoch = 0;
    std::size_t windows = 0;  // 0: empty entry
    std::vector<std::size_t> permutation;
  };
  std::mutex mutex;
  std::array<Entry, 2> entries;
  std::size_t newest = 0;
};

TokenData::TokenData(std::vector<Token> tokens, DataOrder order, std::uint64_t seed,
                     std::string source)
    : tokens_(std::move(tokens)),
      order_(order),
      seed_(seed),
      source_(std::move(source)),
      cache_(std::make_unique<Cache>()) {}
TokenData::TokenData(TokenData&&) noexcept = default;
TokenData& TokenData::operator=(TokenData&&) noexcept = default;
TokenData::~TokenData() = default;

std::size_t TokenData::windows(std::size_t B, std::size_t T) const {
  PACI_MODEL_CHECK(B > 0 && T > 0, "micro-batch shape B={} T={} must be positive", B, T);
  PACI_MODEL_CHECK(B <= std::numeric_limits<std::size_t>::max() / T - 1, "B·T overflows: B={} T={}",
                   B, T);
  const std::size_t window = B * T;
  if (tokens_.size() < window + 1)
    throw InputError(
        fmt::format("{}: {} tokens are too few for one micro-batch of B={} × T={} "
                    "(needs B·T+1 = {})",
                    source_, tokens_.size(), B, T, window + 1));
  return (tokens_.size() - 1) / window;
}

std::size_t TokenData::window_start(std::uint64_t index, std::size_t B, std::size_t T) const {
  const std::size_t W = windows(B, T);
  const std::uint64_t epoch = index / W;
  const auto position = static_cast<std::size_t>(index % W);
  if (order_ == DataOrder::sequential) return position * B * T;
  std::lock_guard lock(cache_->mutex);
  auto& entries = cache_->entries;
  std::size_t slot = entries.size();
  for (std::size_t k = 0; k < entries.size(); ++k)
    if (entries[k].windows == W && entries[k].epoch == epoch) slot = k;
  if (slot == entries.size()) {  // miss: replace the older entry
    slot = 1 - cache_->newest;
    entries[slot] = {epoch, W, epoch_permutation(seed_, epoch, W)};
  }
  cache_->newest = slot;
  return entries[slot].permutation[position] * B * T;
}

void TokenData::microbatch(std::uint64_t index, std::size_t B, std::size_t T,
                           std::span<std::int32_t> inputs, std::span<std::int32_t> targets) const {
  const std::size_t start = window_start(index, B, T);
  PACI_MODEL_CHECK(inputs.size() == B * T && targets.size() == B * T,
                   "inputs ({}) and targets ({}) must hold B·T = {} tokens", inputs.size(),
                   targets.size(), B * T);
  const Token* window = tokens_.data() + start;
  for (std::size_t i = 0; i < B * T; ++i) {
    inputs[i] = window[i];
    targets[i] = window[i + 1];
  }
}

std::vector<Microbatch> validation_microbatches(const TokenData& data, std::size_t count,
                                                std::size_t B, std::size_t T) {
  const std::size_t n = std::min(count, data.windows(B, T));
  const std::span<const Token> tokens = data.tokens();
  std::vector<Microbatch> batches(n);
  for (std::size_t k = 0; k < n; ++k) {
    batches[k].inputs.assign(tokens.begin() + static_cast<std::ptrdiff_t>(k * B * T),
                             tokens.begin() + static_cast<std::ptrdiff_t>((k + 1) * B * T));
    batches[k].targets.assign(tokens.begin() + static_cast<std::ptrdiff_t>(k * B * T + 1),
                              tokens.begin() + static_cast<std::ptrdiff_t>((k + 1) * B * T + 1));
  }
  return batches;
}

TokenSplit split_train_val(std::span<const Token> tokens, double val_fraction) {
  if (!(val_fraction >= 0.0 && val_fraction < 1.0))
    throw InputError(fmt::format("validation fraction {} is outside [0, 1)", val_fraction));
  const auto val =
      static_cast<std::size_t>(std::llround(val_fraction * static_cast<double>(tokens.size())));
  const std::size_t train = tokens.size() - std::min(val, tokens.size());
  return {{tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(train)},
          {tokens.begin() + static_cast<std::ptrdiff_t>(train), tokens.end()}};
}

}  // namespace paci::model
