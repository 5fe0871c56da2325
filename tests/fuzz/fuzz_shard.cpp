// Fuzz target: an llm.c token shard (paci train --data, paci data info), read as parse_shard()
// reads it, with any vocabulary and with GPT-2's. An accepted shard's tokens must come back
// unchanged through serialize_shard(), and read with GPT-2's, every token must be below 50257.
#include <cstddef>
#include <cstdint>

#include "model/shards.hpp"
#include "tests/fuzz/fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace paci;
  for (const std::size_t vocab : {model::kAnyVocab, std::size_t{50257}}) {
    std::vector<model::Token> tokens;
    if (!fuzz::accepts(
            [&] { tokens = model::parse_shard(fuzz::bytes(data, size), "fuzz", vocab); }))
      continue;
    if (vocab < model::kAnyVocab)  // (every 16-bit token is below kAnyVocab)
      for (const model::Token t : tokens) fuzz::require(t < vocab, "a token past the vocabulary");
    std::vector<model::Token> again;
    fuzz::require(fuzz::accepts([&] {
                    again = model::parse_shard(model::serialize_shard(tokens), "rewritten", vocab);
                  }) &&
                      again == tokens,
                  "an accepted shard's tokens change through serialize_shard and back");
  }
  return 0;
}
