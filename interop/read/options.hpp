// The command-line options a tool's own parser accepts, as recorded from that parser (interop/data:
// Megatron-LM core_v0.16.1's add_megatron_arguments, torchtitan 0.3.0's tyro parser), and a
// command line read against them as the tool reads it: names exactly (no abbreviations),
// `--name value` or `--name=value`, as many values as the option takes.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace paci::interop {

struct ToolOption {
  std::string name;  // its first name: the one a parsed line reports
  // "0" (a switch), "1", "?", "*", "+" (argparse's nargs; tyro's 1 and * too), or a count.
  std::string nargs;
  // What a value must be: "int", "float", "str", "" (anything); choices, when the parser has them.
  std::string type;
  std::vector<std::string> choices;
  bool negative = false;  // this name is a switch's --no- form (torchtitan)
};

class OptionTable {
 public:
  // `tool` names it in errors ("Megatron-LM core_v0.16.1"); entries by every name they have.
  OptionTable(std::string tool, std::map<std::string, ToolOption> by_name);
  const ToolOption* find(std::string_view name) const;
  const std::string& tool() const { return tool_; }

 private:
  std::string tool_;
  std::map<std::string, ToolOption, std::less<>> by_name_;
};

// Megatron-LM core_v0.16.1's options (interop/data/megatron_options_core_v0.16.1.json).
const OptionTable& megatron_options();
// torchtitan 0.3.0's top-level options and those of each activation-checkpoint subcommand
// ("activation-checkpoint:full"), and the Llama 3 configs' values for every option
// (interop/data/torchtitan_options_0.3.0.json).
const OptionTable& torchtitan_options();
const OptionTable* torchtitan_subcommand(std::string_view name);
struct TorchtitanConfig {
  std::string activation_checkpoint;               // the subcommand it selects
  const nlohmann::ordered_json* values = nullptr;  // option name -> value
};
// "llama3_8b", "llama3_70b": the recorded configs; nullopt for another name.
std::optional<TorchtitanConfig> torchtitan_config(std::string_view name);

// One option of a parsed command line: its first name (a torchtitan --no-X is reported as X with
// value "false", a bare switch with "true"), its values.
struct GivenOption {
  std::string name;
  std::vector<std::string> values;
};

// Reads `words` as the tool's parser does: each word an option the table knows, followed by as
// many values as it takes (a word beginning with "--" ends a list), each value of the option's
// type and among its choices. A word that is no option of `table` and not in `stop` ends the
// reading when `rest` is given (the rest is put there, from that word on), else is an error.
// InputError naming the word: an unknown option, a missing or extra value, a value of the wrong
// type or not among the choices.
std::vector<GivenOption> parse_options(const OptionTable& table,
                                       const std::vector<std::string>& words,
                                       std::vector<std::string>* rest = nullptr);

// The last value given for `name` (a later option wins, as in argparse), or nullopt.
std::optional<std::string> last_value(const std::vector<GivenOption>& given, std::string_view name);
std::optional<std::vector<std::string>> last_values(const std::vector<GivenOption>& given,
                                                    std::string_view name);

// A whole number as argparse's int reads it, at most kLargestInteger in size; InputError "<what>
// takes a whole number, got 'x'" or naming the bound.
inline constexpr std::int64_t kLargestInteger = (std::int64_t{1} << 31) - 1;
std::int64_t to_integer(std::string_view text, std::string_view what);

}  // namespace paci::interop
