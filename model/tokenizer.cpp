// Byte-level tokenizer: a byte is its own token id. See model/tokenizer.hpp.
#include "model/tokenizer.hpp"
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

}  // namespace paci::model
