// Tests of the data layer: byte tokenizer round trip, llm.c shard format (round trip and one clear
// InputError per kind of bad file), the loader's window rules (llm.c's sequential order, the seeded
// shuffle: coverage, determinism, a golden PRNG check), the split, and `paci data` end to end.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <thread>

#include "model/data.hpp"
#include "model/shards.hpp"
#include "model/tokenizer.hpp"
#include "tests/cli/run.hpp"

namespace paci::model {
namespace {

using paci::testing::run_paci;
using paci::testing::slurp;
using paci::testing::temp_path;
using paci::testing::write_text;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::vector<Token> iota_tokens(std::size_t n, std::size_t vocab = kByteVocab) {
  std::vector<Token> tokens(n);
  for (std::size_t i = 0; i < n; ++i) tokens[i] = static_cast<Token>(i % vocab);
  return tokens;
}

// A shard header with the given fields, then `body` raw.
std::string shard_bytes(std::int32_t magic, std::int32_t version, std::int32_t count,
                        const std::string& body) {
  std::string bytes = serialize_shard({});
  for (int k = 0; k < 4; ++k) {
    bytes[static_cast<std::size_t>(k)] = static_cast<char>(magic >> (8 * k));
    bytes[static_cast<std::size_t>(4 + k)] = static_cast<char>(version >> (8 * k));
    bytes[static_cast<std::size_t>(8 + k)] = static_cast<char>(count >> (8 * k));
  }
  return bytes + body;
}

TEST(Tokenizer, RoundTripsAllByteValues) {
  std::string text;
  for (int b = 0; b < 256; ++b) text += static_cast<char>(b);
  text += text;  // every byte, twice, NUL included
  const std::vector<Token> tokens = encode_bytes(text);
  ASSERT_EQ(tokens.size(), 512u);
  for (std::size_t i = 0; i < tokens.size(); ++i) EXPECT_EQ(tokens[i], i % 256);
  EXPECT_EQ(decode_bytes(tokens), text);
  const std::vector<Token> bpe = {72, 300};
  EXPECT_THROW(
      try { decode_bytes(bpe); } catch (const InputError& e) {
        EXPECT_THAT(e.what(), HasSubstr("token 300 at position 1 is not a byte-level token"));
        throw;
      },
      InputError);
  EXPECT_EQ(escape_bytes(std::string("a\n\"\\\x01\xff", 6)), "a\\n\\\"\\\\\\x01\\xff");
}

TEST(Tokenizer, MostFrequentBytesAreCountedAndOrdered) {
  const std::vector<Token> tokens = encode_bytes("abracadabra");
  const auto top = most_frequent_bytes(tokens, 3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].first, 'a');
  EXPECT_DOUBLE_EQ(top[0].second, 5.0 / 11);
  EXPECT_EQ(top[1].first, 'b');  // b and r twice each: the smaller byte first
  EXPECT_EQ(top[2].first, 'r');
  EXPECT_EQ(most_frequent_bytes(tokens, 10).size(), 5u);  // a, b, r, c, d: no zero counts
  EXPECT_TRUE(most_frequent_bytes({}, 3).empty());
}

TEST(Shard, WriteReadRoundTripAndLayout) {
  for (const std::size_t n : {0u, 1u, 7u, 70000u}) {
    const std::vector<Token> tokens = iota_tokens(n, kAnyVocab);
    const std::string path = temp_path("roundtrip.bin");
    write_shard(path, tokens);
    const std::string bytes = slurp(path);
    ASSERT_EQ(bytes.size(), 1024 + 2 * n);
    EXPECT_EQ(bytes.substr(0, 12),
              shard_bytes(20240520, 1, static_cast<std::int32_t>(n), "").substr(0, 12));
    EXPECT_EQ(bytes.substr(0, 4), std::string("\x88\xd8\x34\x01", 4));  // 20240520, little-endian
    if (n > 1) {
      EXPECT_EQ(bytes.substr(1026, 2), std::string("\x01\x00", 2));
    }
    EXPECT_EQ(read_shard(path), tokens) << n;
  }
}

TEST(Shard, EachBadFileIsOneInputErrorNamingIt) {
  const std::string two_tokens("\x05\x00\x00\x01", 4);  // tokens 5 and 256
  const struct {
    const char* name;
    std::string content;  // not written for "missing"
    std::string words;
  } cases[] = {
      {"missing", "", "No such file or directory"},
      {"empty", "", "empty file, expected an llm.c token shard"},
      {"short_header", std::string(100, 'x'), "(100 bytes, shorter than its 1024-byte header)"},
      {"wrong_magic", shard_bytes(12345, 1, 0, ""),
       "not an llm.c token shard (magic 12345, expected 20240520)"},
      {"model_file", shard_bytes(20240326, 3, 0, ""), "this is an llm.c model file"},
      {"wrong_version", shard_bytes(20240520, 2, 0, ""), "token shard version 2, expected 1"},
      {"negative_count", shard_bytes(20240520, 1, -4, ""), "negative count -4"},
      {"short_body", shard_bytes(20240520, 1, 3, two_tokens),
       "truncated llm.c token shard: the header says 3 tokens (6 bytes), the body has 4 bytes"},
      {"trailing", shard_bytes(20240520, 1, 1, two_tokens), "has 2 bytes after the 1 tokens"},
      {"odd_trailing", shard_bytes(20240520, 1, 2, two_tokens + "z"), "has 1 bytes after"},
      {"out_of_vocab", shard_bytes(20240520, 1, 2, two_tokens),
       "token 256 at position 1 is outside the vocabulary (256 tokens)"},
  };
  for (const auto& c : cases) {
    const std::string path = temp_path(std::string(c.name) + ".bin");
    std::filesystem::remove(path);
    if (std::string(c.name) != "missing") write_text(path, c.content);
    try {
      read_shard(path, kByteVocab);
      ADD_FAILURE() << c.name << ": no error";
    } catch (const InputError& e) {
      EXPECT_THAT(e.what(), AllOf(HasSubstr(path + ": "), HasSubstr(c.words))) << c.name;
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << c.name;
    }
  }
  // The same two tokens are fine for a larger vocabulary.
  write_text(temp_path("vocab.bin"), shard_bytes(20240520, 1, 2, two_tokens));
  EXPECT_EQ(read_shard(temp_path("vocab.bin")), (std::vector<Token>{5, 256}));
}

TEST(Shard, ListsAndPatternsConcatenateInOrder) {
  const std::string dir = temp_path("shards");
  std::filesystem::create_directories(dir);
  write_shard(dir + "/b.bin", std::vector<Token>{3, 4});
  write_shard(dir + "/a.bin", std::vector<Token>{1, 2});
  write_shard(dir + "/c.bin", std::vector<Token>{5});
  EXPECT_EQ(read_shards(dir + "/c.bin," + dir + "/a.bin"), (std::vector<Token>{5, 1, 2}));
  EXPECT_EQ(read_shards(dir + "/*.bin"), (std::vector<Token>{1, 2, 3, 4, 5}));
  EXPECT_EQ(read_shards(dir + "/c.bin," + dir + "/[ab].bin"), (std::vector<Token>{5, 1, 2, 3, 4}));
  EXPECT_THROW(read_shards(dir + "/z*.bin"), InputError);
  EXPECT_THROW(read_shards(dir + "/a.bin,"), InputError);
  EXPECT_THROW(read_shards(dir + "/a.bin," + dir + "/missing.bin"), InputError);
}

TEST(TokenData, SequentialIsLlmcWindowRule) {
  // N = 20, B = 2, T = 3: W = floor(19 / 6) = 3 windows starting at 0, 6, 12; then wrap.
  const TokenData data(iota_tokens(20), DataOrder::sequential);
  EXPECT_EQ(data.windows(2, 3), 3u);
  std::vector<std::int32_t> in(6), tg(6);
  data.microbatch(2, 2, 3, in, tg);
  EXPECT_EQ(in, (std::vector<std::int32_t>{12, 13, 14, 15, 16, 17}));  // rows [12..14], [15..17]
  EXPECT_EQ(tg, (std::vector<std::int32_t>{13, 14, 15, 16, 17, 18}));
  data.microbatch(3, 2, 3, in, tg);  // 12 + 6 + 1 > 20 would run past the end: back to 0
  EXPECT_EQ(in, (std::vector<std::int32_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(tg, (std::vector<std::int32_t>{1, 2, 3, 4, 5, 6}));
  // Sweep: window i mod W starts at (i mod W)·B·T and always fits; one more window would not.
  for (const std::size_t n : {7u, 25u, 64u, 65u, 100u})
    for (const std::size_t B : {1u, 2u, 3u})
      for (const std::size_t T : {1u, 2u, 6u}) {
        if (n < B * T + 1) continue;
        const TokenData d(iota_tokens(n), DataOrder::sequential);
        const std::size_t W = d.windows(B, T);
        EXPECT_EQ(W, (n - 1) / (B * T));
        EXPECT_GT(W * B * T + 1, n - B * T);  // the window after the last would not fit
        for (std::uint64_t i = 0; i < 3 * W; ++i) {
          EXPECT_EQ(d.window_start(i, B, T), (i % W) * B * T);
          EXPECT_LE(d.window_start(i, B, T) + B * T + 1, n);
        }
      }
}

TEST(TokenData, TooFewTokensNameTheSizes) {
  const TokenData data(iota_tokens(12), DataOrder::shuffled, 0, "val.bin");
  EXPECT_EQ(data.windows(3, 3), 1u);  // 12 ≥ 10
  try {
    data.windows(3, 4);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("val.bin: 12 tokens are too few for one micro-batch of B=3 "
                                    "× T=4 (needs B·T+1 = 13)"));
  }
}

TEST(TokenData, ShuffledCoversEveryWindowOncePerEpochAndIsSeeded) {
  const std::size_t B = 2, T = 4;
  const TokenData data(iota_tokens(8 * 37 + 5), DataOrder::shuffled, 7);
  const std::size_t W = data.windows(B, T);
  ASSERT_EQ(W, 37u);
  std::vector<std::vector<std::size_t>> epochs(3);
  for (std::uint64_t i = 0; i < 3 * W; ++i) epochs[i / W].push_back(data.window_start(i, B, T));
  for (auto epoch : epochs) {
    std::sort(epoch.begin(), epoch.end());
    for (std::size_t w = 0; w < W; ++w) EXPECT_EQ(epoch[w], w * B * T);
  }
  EXPECT_NE(epochs[0], epochs[1]);  // a fresh permutation per epoch
  const TokenData same(iota_tokens(8 * 37 + 5), DataOrder::shuffled, 7);
  const TokenData other(iota_tokens(8 * 37 + 5), DataOrder::shuffled, 8);
  std::size_t differ = 0;
  for (std::uint64_t i = 0; i < W; ++i) {
    EXPECT_EQ(same.window_start(i, B, T), epochs[0][i]);
    differ += other.window_start(i, B, T) != epochs[0][i];
  }
  EXPECT_GT(differ, W / 2);
}

TEST(TokenData, MicrobatchDependsOnlyOnItsIndex) {
  const std::size_t B = 3, T = 5, N = 15 * 11 + 2;
  const std::vector<std::uint64_t> indices = {0, 1, 10, 11, 12, 30, 5, 21, 22, 2};
  auto read_all = [&](const std::vector<std::uint64_t>& order) {
    const TokenData data(iota_tokens(N), DataOrder::shuffled, 3);
    std::map<std::uint64_t, std::vector<std::int32_t>> seen;
    std::vector<std::int32_t> in(B * T), tg(B * T);
    for (const std::uint64_t i : order) {
      data.microbatch(i, B, T, in, tg);
      for (std::size_t k = 0; k < B * T; ++k) EXPECT_EQ(tg[k], (in[k] + 1) % 256);
      seen[i] = in;
    }
    return seen;
  };
  std::vector<std::uint64_t> reversed(indices.rbegin(), indices.rend());
  EXPECT_EQ(read_all(indices), read_all(reversed));
  // Two threads reading interleaved epochs see what one thread sees.
  const TokenData data(iota_tokens(N), DataOrder::shuffled, 3);
  std::vector<std::size_t> a(200), b(200);
  std::thread t1([&] {
    for (std::uint64_t i = 0; i < 200; ++i) a[i] = data.window_start(i, B, T);
  });
  std::thread t2([&] {
    for (std::uint64_t i = 200; i-- > 0;) b[i] = data.window_start(i, B, T);
  });
  t1.join();
  t2.join();
  EXPECT_EQ(a, b);
}

TEST(TokenData, GoldenShuffleForSeedOne) {
  SplitMix64 rng{0};  // the reference splitmix64 stream for state 0
  EXPECT_EQ(rng.next(), 0xe220a8397b1dcdafull);
  EXPECT_EQ(rng.next(), 0x6e789e6aa1b965f4ull);
  EXPECT_EQ(rng.next(), 0x06c45d188009454full);
  EXPECT_EQ(epoch_permutation(1, 0, 10), (std::vector<std::size_t>{0, 8, 1, 4, 2, 3, 6, 9, 7, 5}));
  EXPECT_EQ(epoch_permutation(1, 1, 10), (std::vector<std::size_t>{3, 4, 6, 9, 0, 5, 1, 2, 8, 7}));
  const TokenData data(iota_tokens(10 * 8 + 1), DataOrder::shuffled, 1);
  const std::vector<std::size_t> expected = {0, 64, 8, 32, 16, 24, 48, 72, 56, 40, 24, 32, 48};
  for (std::size_t i = 0; i < expected.size(); ++i)
    EXPECT_EQ(data.window_start(i, 2, 4), expected[i]) << i;
}

TEST(TokenData, ValidationPassAndSplit) {
  const TokenData val(iota_tokens(50), DataOrder::shuffled, 9);
  const auto batches = validation_microbatches(val, 100, 2, 4);  // W = 6
  ASSERT_EQ(batches.size(), 6u);
  EXPECT_EQ(batches[1].inputs, (std::vector<std::int32_t>{8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(batches[5].targets, (std::vector<std::int32_t>{41, 42, 43, 44, 45, 46, 47, 48}));
  EXPECT_EQ(validation_microbatches(val, 2, 2, 4).size(), 2u);
  for (const std::size_t n : {1u, 19u, 20u, 1000u})
    for (const double f : {0.0, 0.05, 0.5}) {
      const std::vector<Token> tokens = iota_tokens(n);
      const TokenSplit split = split_train_val(tokens, f);
      const auto expect_val = static_cast<std::size_t>(std::llround(f * static_cast<double>(n)));
      EXPECT_EQ(split.val.size(), expect_val) << n << " " << f;
      std::vector<Token> joined = split.train;
      joined.insert(joined.end(), split.val.begin(), split.val.end());
      EXPECT_EQ(joined, tokens);  // contiguous: train is the prefix, val the suffix
    }
  EXPECT_THROW(split_train_val(iota_tokens(10), 1.0), InputError);
  EXPECT_EQ(parse_data_order("sequential"), DataOrder::sequential);
  EXPECT_THROW(parse_data_order("random"), InputError);
}

TEST(DataCli, TokenizeInfoDecodeRoundTrip) {
  std::string text = "In the beginning God created the heaven and the earth.\n";
  for (int b = 0; b < 256; ++b) text += static_cast<char>(b);
  const std::string input = temp_path("corpus.txt"), train = temp_path("corpus_train.bin"),
                    val = temp_path("corpus_val.bin");
  write_text(input, text);
  auto r = run_paci("data tokenize " + input + " --train " + train + " --val " + val +
                    " --val-fraction 0.1");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("(280 tokens), " + val + " (31 tokens"));
  EXPECT_EQ(read_shard(train).size() + read_shard(val).size(), text.size());
  r = run_paci("data info " + train);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("280 tokens"));
  EXPECT_THAT(r.out, HasSubstr("\"In the beginning God"));
  r = run_paci("data decode " + train + "," + val);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, text);
  r = run_paci("data decode " + train + " --offset 3 --count 9");
  EXPECT_EQ(r.out, "the begin");
  for (const char* sub : {"tokenize", "info", "decode"}) {
    r = run_paci(std::string("data ") + sub + " --help");
    EXPECT_EQ(r.status, 0);
    EXPECT_THAT(r.out, HasSubstr(std::string("usage: paci data ") + sub));
  }
}

TEST(DataCli, BadInputIsOneLineAndExitTwo) {
  const std::string text = temp_path("plain.txt"), empty = temp_path("empty.txt");
  write_text(text, "not a shard");
  write_text(empty, "");
  const struct {
    std::string args, words;
  } cases[] = {
      {"data", "missing subcommand"},
      {"data frob", "unknown subcommand 'frob'"},
      {"data info " + temp_path("nope.bin"), "cannot open "},
      {"data info " + text, "plain.txt: not an llm.c token shard"},
      {"data decode " + text, "plain.txt: not an llm.c token shard"},
      {"data tokenize " + empty + " --train x.bin", "empty.txt: empty file, nothing to tokenize"},
      {"data tokenize " + text + " --train x.bin --val y.bin --val-fraction 1.5",
       "--val-fraction must be in (0, 1)"},
      {"data tokenize " + text + " --train x.bin --val-fraction 0.1", "--val-fraction needs --val"},
  };
  for (const auto& c : cases) {
    const auto r = run_paci(c.args);
    EXPECT_EQ(r.status, 2) << c.args;
    EXPECT_THAT(r.err, HasSubstr(c.words)) << c.args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << c.args << ": " << r.err;
  }
}

}  // namespace
}  // namespace paci::model
