// Byte-level tokenizer (vocabulary 256): every byte of the text is one token, its value 0..255, so
// decode(encode(s)) == s for any bytes, valid UTF-8 or not. Token ids are uint16, as in llm.c's
// token shards (model/shards.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/check.hpp"  // InputError

namespace paci::model {

using Token = std::uint16_t;

inline constexpr std::size_t kByteVocab = 256;  // V of the byte-level tokenizer

std::vector<Token> encode_bytes(std::string_view text);

// Throws InputError naming the first token >= 256 and its position ("not a byte-level
// token"), e.g. for a shard written by a GPT-2 BPE tokenizer.
std::string decode_bytes(std::span<const Token> tokens);

// One line of readable text for logs: printable ASCII as is, \n \t \r \\ \" escaped, any other
// byte as \xHH.
std::string escape_bytes(std::string_view bytes);

// The `k` most frequent byte tokens of `tokens` (each below kByteVocab) with their share, most
// frequent first (ties: the smaller byte first); bytes that never occur are left out.
std::vector<std::pair<Token, double>> most_frequent_bytes(std::span<const Token> tokens,
                                                          std::size_t k);

}  // namespace paci::model
