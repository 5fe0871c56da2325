// Byte-level tokenizer: a byte is its own token id. See model/tokenizer.hpp.
#include "model/tokenizer.hpp"
#include <algorithm>
#include <array>
#include "model/check.hpp"

#include <fmt/format.h>

namespace paci::model {

std::vector<Token> encode_bytes(std::string_view text) {
  std::vector<Token> tokens(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) tokens[i] = static_cast<unsigned char>(text[i]);
  return tokens;
}

std::string decode_bytes(std::span<const Token> tokens) {
  std::string text(tokens.size(), '\0');
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] >= kByteVocab)
      throw InputError(fmt::format(
          "token {} at position {} is not a byte-level token (vocabulary {}); cannot decode",
          tokens[i], i, kByteVocab));
    text[i] = static_cast<char>(static_cast<unsigned char>(tokens[i]));
  }
  return text;
}

std::string escape_bytes(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (const char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    switch (c) {
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      default:
        if (b >= 0x20 && b < 0x7f)
          out += c;
        else
          out += fmt::format("\\x{:02x}", b);
    }
  }
  return out;
}

std::vector<std::pair<Token, double>> most_frequent_bytes(std::span<const Token> tokens,
                                                          std::size_t k) {
  std::array<std::size_t, kByteVocab> counts{};
  for (const Token t : tokens) ++counts.at(t);
  std::array<std::size_t, kByteVocab> order{};
  for (std::size_t b = 0; b < order.size(); ++b) order[b] = b;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return counts[a] > counts[b]; });
  std::vector<std::pair<Token, double>> out;
  for (std::size_t i = 0; i < k && i < order.size() && counts[order[i]] > 0; ++i)
    out.emplace_back(static_cast<Token>(order[i]),
                     static_cast<double>(counts[order[i]]) / static_cast<double>(tokens.size()));
  return out;
}

}  // namespace paci::model
