// paci data tokenize | info | decode — raw text to llm.c token shards through the byte-level
// tokenizer with a contiguous train/validation split, and a look inside shards (model/shards.hpp,
// docs/data.md). Bad files and flags are one line on stderr and exit 2.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <iostream>

#include "cli/common.hpp"
#include "model/data.hpp"
#include "model/shards.hpp"
#include "model/tokenizer.hpp"
#include "schedules/formats.hpp"

namespace paci::cli {
namespace {

using model::Token;

constexpr const char* kDataUsage =
    "tokenize | info | decode ...\n\n"
    "  paci data tokenize INPUT.txt --train TRAIN.bin [--val VAL.bin] [--val-fraction 0.05]\n"
    "  paci data info FILE.bin...\n"
    "  paci data decode FILES [--offset K] [--count N]   (FILES: a.bin,b.bin or 'data/*.bin')\n";

std::size_t non_negative(std::int64_t value, const char* flag) {
  if (value < 0) throw UsageError(fmt::format("{} must be non-negative, got {}", flag, value));
  return static_cast<std::size_t>(value);
}

int run_tokenize(const std::vector<std::string>& args) {
  std::string input, train_path, val_path;
  double val_fraction = 0.05;
  po::options_description options("options");
  auto add = options.add_options();
  add("input", po::value(&input)->required(), "UTF-8 (or any) text, - for stdin");
  add("train", po::value(&train_path)->required(), "training shard to write");
  add("val", po::value(&val_path), "validation shard to write (the end of the text)");
  add("val-fraction", po::value(&val_fraction)->default_value(0.05, "0.05"),
      "share of the tokens, taken from the end, that go to --val");
  po::positional_options_description positional;
  positional.add("input", 1);
  po::variables_map vm;
  if (!parse_options("data tokenize", "INPUT --train TRAIN.bin [--val VAL.bin] [--val-fraction F]",
                     options, positional, args, vm))
    return 0;
  if (val_path.empty() && !vm["val-fraction"].defaulted())
    throw UsageError("--val-fraction needs --val");
  if (!val_path.empty() && !(val_fraction > 0.0 && val_fraction < 1.0))
    throw UsageError(fmt::format("--val-fraction must be in (0, 1), got {}", val_fraction));
  const std::string source = input == "-" ? "<stdin>" : input;
  const std::string text = read_input(input);
  if (text.empty()) throw InputError(fmt::format("{}: empty file, nothing to tokenize", source));
  const std::vector<Token> tokens = model::encode_bytes(text);
  const model::TokenSplit split =
      model::split_train_val(tokens, val_path.empty() ? 0.0 : val_fraction);
  if (!val_path.empty() && (split.val.empty() || split.train.empty()))
    throw InputError(fmt::format("{}: {} tokens are too few to split with --val-fraction {}",
                                 source, tokens.size(), val_fraction));
  model::write_shard(train_path, split.train);
  std::string line = fmt::format("{}: {} bytes -> {} ({} tokens)", source, text.size(), train_path,
                                 split.train.size());
  if (!val_path.empty()) {
    model::write_shard(val_path, split.val);
    line += fmt::format(
        ", {} ({} tokens, the last {:.2f}%)", val_path, split.val.size(),
        100.0 * static_cast<double>(split.val.size()) / static_cast<double>(tokens.size()));
  }
  std::cout << line << '\n';
  return 0;
}

void print_info(const std::string& path) {
  const std::vector<Token> tokens = model::read_shard(path);
  const Token largest = tokens.empty() ? 0 : *std::max_element(tokens.begin(), tokens.end());
  const bool bytes = largest < model::kByteVocab;
  std::cout << fmt::format("{}: llm.c token shard v{}, {} tokens, largest token {}{}\n", path,
                           model::kShardVersion, tokens.size(), largest,
                           bytes ? " (byte-level)" : "");
  const std::span<const Token> head(tokens.data(), std::min<std::size_t>(tokens.size(), 64));
  if (bytes) {
    std::cout << fmt::format("  first {} tokens: \"{}\"\n", head.size(),
                             model::escape_bytes(model::decode_bytes(head)));
    std::string top;
    for (const auto& [byte, share] : model::most_frequent_bytes(tokens, 5))
      top += fmt::format("{}\"{}\" {:.1f}%", top.empty() ? "" : ", ",
                         model::escape_bytes(std::string(1, static_cast<char>(byte))), 100 * share);
    if (!top.empty()) std::cout << "  most frequent bytes: " << top << '\n';
  } else {
    std::cout << fmt::format("  first {} tokens: {}\n", head.size(), fmt::join(head, " "));
  }
}

int run_info(const std::vector<std::string>& args) {
  std::vector<std::string> files;
  po::options_description options("options");
  auto add = options.add_options();
  add("file", po::value(&files)->required()->multitoken(), "shard files");
  po::positional_options_description positional;
  positional.add("file", -1);
  po::variables_map vm;
  if (!parse_options("data info", "FILE.bin...", options, positional, args, vm)) return 0;
  for (const auto& file : files) print_info(file);
  return 0;
}

int run_decode(const std::vector<std::string>& args) {
  std::string files;
  std::int64_t offset = 0, count = -1;
  po::options_description options("options");
  auto add = options.add_options();
  add("files", po::value(&files)->required(),
      "shards, concatenated: a,b.bin or a glob pattern 'data/*.bin'");
  add("offset", po::value(&offset)->default_value(0), "first token to print");
  add("count,n", po::value(&count), "tokens to print (default: all to the end)");
  po::positional_options_description positional;
  positional.add("files", 1);
  po::variables_map vm;
  if (!parse_options("data decode", "FILES [--offset K] [--count N]", options, positional, args,
                     vm))
    return 0;
  const std::size_t first = non_negative(offset, "--offset");
  const std::vector<Token> tokens = model::read_shards(files);
  const std::size_t begin = std::min(first, tokens.size());
  std::size_t n = tokens.size() - begin;
  if (vm.count("count")) n = std::min(n, non_negative(count, "--count"));
  const std::string text = model::decode_bytes(std::span<const Token>(tokens).subspan(begin, n));
  std::cout << text << std::flush;
  if (!std::cout) throw std::runtime_error("cannot write to standard output");
  return 0;
}

}  // namespace

int run_data(const std::vector<std::string>& args) {
  if (args.empty()) throw UsageError("missing subcommand: tokenize, info or decode");
  const std::string& sub = args[0];
  if (sub == "--help" || sub == "-h" || sub == "help") {
    std::cout << "usage: paci data " << kDataUsage;
    return 0;
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (sub == "tokenize") return run_tokenize(rest);
  if (sub == "info") return run_info(rest);
  if (sub == "decode") return run_decode(rest);
  throw UsageError(fmt::format("unknown subcommand '{}' (tokenize, info or decode)", sub));
}

}  // namespace paci::cli
