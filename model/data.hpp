// The token loader: micro-batch `index` of B sequences × T tokens is a pure function of (tokens,
// order, seed, index), so every pipeline schedule, thread and replay reads the same data. Windows
// of B·T+1 tokens as in llm.c's loader; sequential or shuffled per epoch (splitmix64 +
// Fisher–Yates, the same on every platform). docs/data.md gives the exact rules.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/check.hpp"  // InputError
#include "model/rng.hpp"
#include "model/tokenizer.hpp"

namespace paci::model {

enum class DataOrder { sequential, shuffled };
std::string_view to_string(DataOrder order);
DataOrder parse_data_order(std::string_view text);  // InputError unless sequential | shuffled

// Permutation of 0..n-1: Fisher–Yates from the top (j = n-1 … 1 swaps j with below(j+1)) on the
// identity, with SplitMix64{mix(mix(seed) ^ epoch)} where mix(x) = SplitMix64{x}.next().
std::vector<std::size_t> epoch_permutation(std::uint64_t seed, std::uint64_t epoch, std::size_t n);

class TokenData {
 public:
  // `source` names the data in errors (file names). Tokens are copied to int32 on read only.
  explicit TokenData(std::vector<Token> tokens, DataOrder order = DataOrder::shuffled,
                     std::uint64_t seed = 0, std::string source = "data");
  TokenData(TokenData&&) noexcept;
  TokenData& operator=(TokenData&&) noexcept;
  ~TokenData();

  std::size_t size() const { return tokens_.size(); }  // N
  std::span<const Token> tokens() const { return tokens_; }
  DataOrder order() const { return order_; }
  std::uint64_t seed() const { return seed_; }
  const std::string& source() const { return source_; }

  // W = floor((N − 1) / (B·T)), the windows of B·T+1 tokens in one epoch. Throws InputError naming
  // the sizes when N < B·T + 1 (W would be 0).
  std::size_t windows(std::size_t B, std::size_t T) const;
  // First token of micro-batch `index`'s window: w·B·T with w = index mod W (sequential) or
  // w = permutation(seed, index / W)[index mod W] (shuffled).
  std::size_t window_start(std::uint64_t index, std::size_t B, std::size_t T) const;
  // inputs[b·T + t] = tokens[s + b·T + t], targets[b·T + t] = tokens[s + b·T + t + 1], s the
  // window start; both spans hold B·T values (row b is sequence b). Thread-safe (const).
  void microbatch(std::uint64_t index, std::size_t B, std::size_t T, std::span<std::int32_t> inputs,
                  std::span<std::int32_t> targets) const;

 private:
  struct Cache;  // the last two epochs' permutations, behind a mutex
  std::vector<Token> tokens_;
  DataOrder order_;
  std::uint64_t seed_;
  std::string source_;
  std::unique_ptr<Cache> cache_;
};

struct Microbatch {
  std::vector<std::int32_t> inputs, targets;  // (B, T) each
};
// The validation pass: the first min(count, W) micro-batches of `tokens` in sequential order
// (micro-batch k is window k), whatever order the training data uses.
std::vector<Microbatch> validation_microbatches(const TokenData& data, std::size_t count,
                                                std::size_t B, std::size_t T);

// Train/validation split of one token stream: the last round(val_fraction · N) tokens are the
// validation part, the rest (a contiguous prefix) the training part. 0 ≤ val_fraction < 1.
struct TokenSplit {
  std::vector<Token> train, val;
};
TokenSplit split_train_val(std::span<const Token> tokens, double val_fraction);

}  // namespace paci::model
