// llm.c token shard reading, validation and atomic writing. See model/shards.hpp for the format.
// Files go through model/checkpoint_io.hpp (whole-file reader, atomic writer); errors are
// InputError.
#include "model/shards.hpp"
#include "model/check.hpp"

#include <fmt/format.h>
#include <glob.h>

#include <algorithm>

#include "model/checkpoint_io.hpp"

namespace paci::model {
namespace {

[[noreturn]] void fail(std::string_view source, const std::string& message) {
  throw InputError(fmt::format("{}: {}", source, message));
}

std::int32_t load_i32(const unsigned char* p) {
  const std::uint32_t u = std::uint32_t{p[0]} | std::uint32_t{p[1]} << 8 |
                          std::uint32_t{p[2]} << 16 | std::uint32_t{p[3]} << 24;
  return static_cast<std::int32_t>(u);
}

void store_i32(char* p, std::int32_t value) {
  const auto u = static_cast<std::uint32_t>(value);
  for (int k = 0; k < 4; ++k) p[k] = static_cast<char>((u >> (8 * k)) & 0xffu);
}

bool is_pattern(std::string_view item) {
  return item.find_first_of("*?[") != item.npos;
}

}  // namespace

std::vector<Token> parse_shard(std::string_view bytes, std::string_view source, std::size_t vocab) {
  if (bytes.empty()) fail(source, "empty file, expected an llm.c token shard");
  if (bytes.size() < kShardHeaderBytes)
    fail(source, fmt::format("not an llm.c token shard ({} bytes, shorter than its {}-byte header)",
                             bytes.size(), kShardHeaderBytes));
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  const std::int32_t magic = load_i32(data);
  if (magic != kShardMagic)
    fail(source,
         fmt::format("not an llm.c token shard (magic {}, expected {}){}", magic, kShardMagic,
                     magic == 20240326 ? "; this is an llm.c model file" : ""));
  const std::int32_t version = load_i32(data + 4);
  if (version != kShardVersion)
    fail(source, fmt::format("llm.c token shard version {}, expected {}", version, kShardVersion));
  const std::int32_t count = load_i32(data + 8);
  if (count < 0) fail(source, fmt::format("llm.c token shard with a negative count {}", count));
  const std::size_t tokens = static_cast<std::size_t>(count);
  const std::size_t body_bytes = bytes.size() - kShardHeaderBytes;
  if (body_bytes < tokens * sizeof(Token))
    fail(source, fmt::format("truncated llm.c token shard: the header says {} tokens ({} bytes), "
                             "the body has {} bytes",
                             tokens, tokens * sizeof(Token), body_bytes));
  if (body_bytes > tokens * sizeof(Token))
    fail(source, fmt::format("llm.c token shard has {} bytes after the {} tokens its header says",
                             body_bytes - tokens * sizeof(Token), tokens));
  std::vector<Token> out(tokens);
  const unsigned char* body = data + kShardHeaderBytes;
  for (std::size_t i = 0; i < tokens; ++i) {
    out[i] = static_cast<Token>(body[2 * i] | body[2 * i + 1] << 8);
    if (out[i] >= vocab)
      fail(source, fmt::format("token {} at position {} is outside the vocabulary ({} tokens)",
                               out[i], i, vocab));
  }
  return out;
}

std::string serialize_shard(std::span<const Token> tokens) {
  if (tokens.size() > kMaxShardTokens)
    throw InputError(
        fmt::format("{} tokens do not fit one llm.c token shard (int32 count, at most "
                    "{}); split the text",
                    tokens.size(), kMaxShardTokens));
  std::string bytes(kShardHeaderBytes + tokens.size() * sizeof(Token), '\0');
  store_i32(bytes.data(), kShardMagic);
  store_i32(bytes.data() + 4, kShardVersion);
  store_i32(bytes.data() + 8, static_cast<std::int32_t>(tokens.size()));
  char* body = bytes.data() + kShardHeaderBytes;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    body[2 * i] = static_cast<char>(tokens[i] & 0xffu);
    body[2 * i + 1] = static_cast<char>(tokens[i] >> 8);
  }
  return bytes;
}

std::vector<Token> read_shard(const std::string& path, std::size_t vocab) {
  BinaryReader reader(path);
  std::string bytes(reader.size_bytes(), '\0');
  reader.read(bytes.data(), bytes.size(), "the shard");
  return parse_shard(bytes, path, vocab);
}

void write_shard(const std::string& path, std::span<const Token> tokens) {
  const std::string bytes = serialize_shard(tokens);
  AtomicWriter writer(path);
  writer.write(bytes.data(), bytes.size());
  writer.commit();
}

std::vector<std::string> expand_shard_list(std::string_view list) {
  std::vector<std::string> paths;
  std::size_t begin = 0;
  while (true) {
    const std::size_t comma = std::min(list.find(',', begin), list.size());
    const std::string item(list.substr(begin, comma - begin));
    if (item.empty())
      throw InputError(fmt::format("'{}': empty item in a comma-separated list of shards", list));
    if (!is_pattern(item)) {
      paths.push_back(item);
    } else {
      glob_t matches{};
      const int rc = ::glob(item.c_str(), 0, nullptr, &matches);
      if (rc == 0)
        for (std::size_t i = 0; i < matches.gl_pathc; ++i) paths.emplace_back(matches.gl_pathv[i]);
      ::globfree(&matches);
      if (rc != 0) throw InputError(fmt::format("{}: no file matches this pattern", item));
    }
    if (comma == list.size()) break;
    begin = comma + 1;
  }
  return paths;
}

std::vector<Token> read_shards(std::string_view list, std::size_t vocab) {
  std::vector<Token> tokens;
  for (const auto& path : expand_shard_list(list)) {
    const std::vector<Token> shard = read_shard(path, vocab);
    tokens.insert(tokens.end(), shard.begin(), shard.end());
  }
  return tokens;
}

}  // namespace paci::model
