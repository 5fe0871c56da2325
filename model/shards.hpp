// llm.c token shards (.bin): a header of 256 little-endian int32 — [0] magic 20240520, [1] version
// 1, [2] token count — then that many little-endian uint16 tokens, nothing after. Reading checks
// every field and throws InputError with one line naming the file; writing is atomic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/check.hpp"  // InputError
#include "model/tokenizer.hpp"

namespace paci::model {

inline constexpr std::int32_t kShardMagic = 20240520;
inline constexpr std::int32_t kShardVersion = 1;
inline constexpr std::size_t kShardHeaderInts = 256;
inline constexpr std::size_t kShardHeaderBytes = kShardHeaderInts * sizeof(std::int32_t);
inline constexpr std::size_t kAnyVocab = 65536;  // every uint16 token is in range
// The header's count is an int32: one shard holds at most this many tokens.
inline constexpr std::size_t kMaxShardTokens = 2147483647;

// Parses a whole shard already in memory; `source` names it in errors ("data/x.bin: ..."). Every
// token must be < vocab (kAnyVocab: no check). Throws InputError for an empty or short file, a
// wrong magic or version, a body shorter or longer than the header's count, or a token >= vocab.
std::vector<Token> parse_shard(std::string_view bytes, std::string_view source,
                               std::size_t vocab = kAnyVocab);
// The shard's bytes: header then tokens. Throws InputError past kMaxShardTokens.
std::string serialize_shard(std::span<const Token> tokens);

// Reads a whole file into memory and parses it; InputError "cannot open PATH: ..." when missing.
std::vector<Token> read_shard(const std::string& path, std::size_t vocab = kAnyVocab);
// Writes a shard atomically (a temporary file in the same folder, then rename); a failure to write
// throws std::runtime_error naming the path.
void write_shard(const std::string& path, std::span<const Token> tokens);

// Several shards named by one string: a comma-separated list whose items are paths or glob
// patterns (*, ?, [...]); a pattern expands to its matches in sorted order. Throws InputError for
// an empty item or a pattern that matches nothing. A plain path is returned as is (unchecked).
std::vector<std::string> expand_shard_list(std::string_view list);
// The shards of expand_shard_list(list) read and concatenated in that order.
std::vector<Token> read_shards(std::string_view list, std::size_t vocab = kAnyVocab);

}  // namespace paci::model
