// The recorded option tables (compiled in from interop/data) and a command line read against one.
#include "interop/read/options.hpp"

#include <fmt/format.h>

#include <charconv>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "base/errors.hpp"

namespace paci::interop {

namespace detail {
extern const std::size_t kEmbeddedToolOptionsCount;
extern const char* const kEmbeddedToolOptionsNames[];  // "megatron", "torchtitan"
extern const char* const kEmbeddedToolOptionsTexts[];
}  // namespace detail

namespace {

using nlohmann::ordered_json;

const ordered_json& recorded(std::string_view name) {
  static const std::map<std::string, ordered_json, std::less<>> texts = [] {
    std::map<std::string, ordered_json, std::less<>> out;
    for (std::size_t i = 0; i < detail::kEmbeddedToolOptionsCount; ++i)
      out.emplace(detail::kEmbeddedToolOptionsNames[i],
                  ordered_json::parse(detail::kEmbeddedToolOptionsTexts[i]));
    return out;
  }();
  const auto it = texts.find(name);
  if (it == texts.end())
    throw std::logic_error(fmt::format("no recorded option table '{}' compiled in", name));
  return it->second;
}

std::string nargs_text(const ordered_json& nargs) {
  if (nargs.is_null()) return "1";
  if (nargs.is_number_integer()) return std::to_string(nargs.get<std::int64_t>());
  return nargs.get<std::string>();
}

std::vector<std::string> choice_texts(const ordered_json& choices) {
  std::vector<std::string> out;
  if (choices.is_array())
    for (const ordered_json& c : choices)
      out.push_back(c.is_string() ? c.get<std::string>() : c.dump());
  return out;
}

// Megatron-LM's recorded argparse actions: store_true/store_false/store_const take no value.
OptionTable megatron_table(const ordered_json& doc) {
  std::map<std::string, ToolOption> by_name;
  for (const auto& [name, e] : doc.at("options").items()) {
    ToolOption o;
    o.name = e.at("names").at(0).get<std::string>();
    o.nargs = nargs_text(e.at("nargs"));
    const std::string action = e.at("action").get<std::string>();
    if (action == "store_true" || action == "store_false" || action == "store_const" ||
        action == "count" || action == "help")
      o.nargs = "0";
    const ordered_json& type = e.at("type");
    if (type.is_string() && (type == "int" || type == "float" || type == "str"))
      o.type = type.get<std::string>();
    o.choices = choice_texts(e.at("choices"));
    by_name.emplace(name, std::move(o));
  }
  return OptionTable(fmt::format("Megatron-LM {}", doc.at("tag").get<std::string>()),
                     std::move(by_name));
}

// torchtitan's tyro options: a switch has the names --X and --no-X; a value's type is in its
// metavar (INT, FLOAT|INT, STR, {None}|INT, ...).
OptionTable torchtitan_table(const ordered_json& options, const std::string& tool) {
  std::map<std::string, ToolOption> by_name;
  for (const auto& [first, e] : options.items()) {
    ToolOption o;
    o.name = first;
    const bool is_switch = e.at("kind") == "switch";
    o.nargs = is_switch ? "0" : nargs_text(e.at("nargs"));
    const std::string metavar =
        e.at("metavar").is_string() ? e.at("metavar").get<std::string>() : "";
    if (metavar == "INT" || metavar == "{None}|INT") o.type = "int";
    if (metavar == "FLOAT|INT" || metavar == "FLOAT") o.type = "float";
    o.choices = choice_texts(e.at("choices"));
    for (const ordered_json& n : e.at("names")) {
      ToolOption named = o;
      named.negative = n.get<std::string>() != first;
      by_name.emplace(n.get<std::string>(), std::move(named));
    }
  }
  return OptionTable(tool, std::move(by_name));
}

std::string torchtitan_tool() {
  return fmt::format("torchtitan {}", recorded("torchtitan").at("torchtitan").get<std::string>());
}

bool is_integer(std::string_view s) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && end == s.data() + s.size() && !s.empty();
}

bool is_number(std::string_view s) {
  if (s.empty()) return false;
  try {
    std::size_t used = 0;
    (void)std::stod(std::string(s), &used);
    return used == s.size();
  } catch (const std::exception&) {
    return false;
  }
}

void check_value(const OptionTable& table, const ToolOption& o, std::string_view given,
                 const std::string& value) {
  if (!o.choices.empty() && std::find(o.choices.begin(), o.choices.end(), value) == o.choices.end())
    throw InputError(fmt::format("{}: {} takes one of {}, got '{}'", table.tool(), given,
                                 fmt::join(o.choices, ", "), value));
  if (o.type == "int" && !is_integer(value) && value != "None")
    throw InputError(
        fmt::format("{}: {} takes a whole number, got '{}'", table.tool(), given, value));
  if (o.type == "float" && !is_number(value))
    throw InputError(fmt::format("{}: {} takes a number, got '{}'", table.tool(), given, value));
}

}  // namespace

OptionTable::OptionTable(std::string tool, std::map<std::string, ToolOption> by_name)
    : tool_(std::move(tool)), by_name_(by_name.begin(), by_name.end()) {}

const ToolOption* OptionTable::find(std::string_view name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &it->second;
}

const OptionTable& megatron_options() {
  static const OptionTable table = megatron_table(recorded("megatron"));
  return table;
}

const OptionTable& torchtitan_options() {
  static const OptionTable table =
      torchtitan_table(recorded("torchtitan").at("options"), torchtitan_tool());
  return table;
}

const OptionTable* torchtitan_subcommand(std::string_view name) {
  static const std::map<std::string, OptionTable, std::less<>> tables = [] {
    std::map<std::string, OptionTable, std::less<>> out;
    for (const auto& [sub, e] : recorded("torchtitan").at("subcommands").items())
      out.emplace(sub, torchtitan_table(e.at("options"), torchtitan_tool() + " " + sub));
    return out;
  }();
  const auto it = tables.find(name);
  return it == tables.end() ? nullptr : &it->second;
}

std::optional<TorchtitanConfig> torchtitan_config(std::string_view name) {
  const ordered_json& configs = recorded("torchtitan").at("configs");
  const auto it = configs.find(std::string(name));
  if (it == configs.end()) return std::nullopt;
  return TorchtitanConfig{it->at("activation_checkpoint").get<std::string>(), &it->at("values")};
}

std::vector<GivenOption> parse_options(const OptionTable& table,
                                       const std::vector<std::string>& words,
                                       std::vector<std::string>* rest) {
  std::vector<GivenOption> out;
  for (std::size_t i = 0; i < words.size(); ++i) {
    std::string word = words[i];
    std::optional<std::string> attached;  // --name=value
    if (const auto eq = word.find('='); word.starts_with("--") && eq != std::string::npos) {
      attached = word.substr(eq + 1);
      word.resize(eq);
    }
    const ToolOption* o = table.find(word);
    if (!o) {
      if (rest && !word.starts_with("-")) {
        rest->assign(words.begin() + static_cast<std::ptrdiff_t>(i), words.end());
        return out;
      }
      throw InputError(word.starts_with("-")
                           ? fmt::format("{} has no option {}", table.tool(), word)
                           : fmt::format("{}: '{}' is not an option (options begin with --)",
                                         table.tool(), word));
    }
    GivenOption g{o->name, {}};
    if (o->nargs == "0") {
      if (attached)
        throw InputError(
            fmt::format("{}: {} takes no value, got '{}'", table.tool(), word, *attached));
      g.values.push_back(o->negative ? "false" : "true");
      out.push_back(std::move(g));
      continue;
    }
    const auto value_word = [&](std::size_t j) {
      return j < words.size() && !(words[j].starts_with("--") && words[j].size() > 2);
    };
    if (attached) {
      g.values.push_back(*attached);
    } else if (o->nargs == "?" || o->nargs == "*" || o->nargs == "+") {
      while (value_word(i + 1) && (o->nargs != "?" || g.values.empty()))
        g.values.push_back(words[++i]);
      if (o->nargs == "+" && g.values.empty())
        throw InputError(fmt::format("{}: {} needs at least one value", table.tool(), word));
    } else {
      const std::int64_t n = to_integer(o->nargs, "nargs");
      for (std::int64_t k = 0; k < n; ++k) {
        if (!value_word(i + 1))
          throw InputError(
              fmt::format("{}: {} needs {} value{}", table.tool(), word, n, n == 1 ? "" : "s"));
        g.values.push_back(words[++i]);
      }
    }
    for (const std::string& v : g.values) check_value(table, *o, word, v);
    out.push_back(std::move(g));
  }
  return out;
}

std::optional<std::vector<std::string>> last_values(const std::vector<GivenOption>& given,
                                                    std::string_view name) {
  for (auto it = given.rbegin(); it != given.rend(); ++it)
    if (it->name == name) return it->values;
  return std::nullopt;
}

std::optional<std::string> last_value(const std::vector<GivenOption>& given,
                                      std::string_view name) {
  const auto v = last_values(given, name);
  if (!v || v->empty()) return std::nullopt;
  return v->back();
}

std::int64_t to_integer(std::string_view text, std::string_view what) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    throw InputError(fmt::format("{} takes a whole number, got '{}'", what, text));
  // Every count a launch gives (sizes, degrees, batches) fits in 31 bits; bounded so, no product
  // of two of them overflows.
  if (v > kLargestInteger || v < -kLargestInteger)
    throw InputError(
        fmt::format("{} {}: paci reads whole numbers up to 2^31 - 1 (2147483647)", what, text));
  return v;
}

}  // namespace paci::interop
