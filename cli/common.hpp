// Shared wiring for the paci subcommands: option parsing with --help, and the error convention
// (UsageError and InputError -> exit 2 with one line on stderr; anything else -> exit 1).
#pragma once

#include <boost/program_options.hpp>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/errors.hpp"

namespace paci::cli {

namespace po = boost::program_options;

using paci::UsageError;  // base/errors.hpp: an InputError the flags caused

struct Command {
  std::string name;
  std::string summary;
  std::function<int(const std::vector<std::string>& args)> run;
};

const std::vector<Command>& commands();

// Parses args against `options` (+ positional), handling --help. Returns false when help was
// printed (the command then exits 0). Throws UsageError on bad options.
bool parse_options(const std::string& command, const std::string& usage,
                   const po::options_description& options,
                   const po::positional_options_description& positional,
                   const std::vector<std::string>& args, po::variables_map& vm);
// Whether the user gave option `name` (not just its default).
bool given(const po::variables_map& vm, const char* name);

// "a,b,c" -> {"a", "b", "c"} (empty items kept).
std::vector<std::string> split_commas(const std::string& text);
// "1,2,8" -> {1, 2, 8}: whole numbers in [1, at_most]; UsageError naming --flag and the item
// otherwise.
std::vector<long long> parse_count_list(const std::string& text, const std::string& flag,
                                        long long at_most);
template <typename T>
std::vector<T> parse_counts(const std::string& text, const std::string& flag, long long at_most) {
  std::vector<T> out;
  for (const long long v : parse_count_list(text, flag, at_most)) out.push_back(static_cast<T>(v));
  return out;
}
// The notifier of every --chunks option: a given value must be at least 1 (absent, the
// generator's default applies); UsageError otherwise.
void check_chunks_flag(std::int32_t chunks);

int run_schedule(const std::vector<std::string>& args);
int run_validate(const std::vector<std::string>& args);
int run_analyze(const std::vector<std::string>& args);
int run_simulate(const std::vector<std::string>& args);
int run_compare(const std::vector<std::string>& args);
int run_sweep(const std::vector<std::string>& args);
int run_train(const std::vector<std::string>& args);
int run_calibrate(const std::vector<std::string>& args);
int run_fidelity(const std::vector<std::string>& args);
int run_costmodel(const std::vector<std::string>& args);
int run_plan(const std::vector<std::string>& args);
int run_data(const std::vector<std::string>& args);

}  // namespace paci::cli
