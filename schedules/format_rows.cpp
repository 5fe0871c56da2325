// The "rows of tokens" reader shared by CSV and text: comments, the "# paci.schedule/1 key=value"
// metadata header, one device per line, the legacy B+W -> I+W rule, and the inference of missing
// metadata (stages, placement, steps, micro-batches) for header-less files such as PyTorch's CSV.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <optional>

#include "schedules/format_rows.hpp"
#include "schedules/formats.hpp"

namespace paci::detail {

namespace {

// Characters written as is in the header's kind; every other byte is written as %XX.
bool is_plain_kind_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.' || c == '+' || c == ':' || c == '/';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

struct Header {
  std::int64_t line = 0;  // 0: no header
  std::optional<std::string> kind;
  std::optional<std::int32_t> stages, microbatches, steps, copies;
  std::optional<WeightPolicy> weight_policy;
  std::optional<std::vector<std::int32_t>> placement;
};

// Parses the header's words after the leading "#"; `where` is "SOURCE: line L".
void parse_header(std::string_view text, Header& header, const std::string& where) {
  auto bad = [&](std::string_view message) {
    throw InputError(fmt::format("{}: {}", where, message));
  };
  auto parse_int = [&](std::string_view key, std::string_view value) {
    std::int32_t out = 0;
    const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), out);
    if (value.empty() || ec != std::errc() || ptr != value.data() + value.size())
      bad(fmt::format("metadata key '{}' must be an integer, got '{}'", key, value));
    return out;
  };
  auto parse_count = [&](std::string_view key, std::string_view value) {
    const std::int32_t out = parse_int(key, value);
    if (out <= 0) bad(fmt::format("metadata key '{}' must be positive, got {}", key, out));
    return out;
  };
  bool first = true;
  std::vector<std::string_view> seen;
  std::size_t pos = 0;
  while (pos < text.size()) {
    while (pos < text.size() && is_space(text[pos])) ++pos;
    std::size_t end = pos;
    while (end < text.size() && !is_space(text[end])) ++end;
    const std::string_view word = text.substr(pos, end - pos);
    pos = end;
    if (word.empty()) break;
    if (first) {
      if (word != kScheduleFormatTag)
        bad(fmt::format("unsupported format '{}' (expected {})", word, kScheduleFormatTag));
      first = false;
      continue;
    }
    const std::size_t eq = word.find('=');
    if (eq == std::string_view::npos) bad(fmt::format("metadata item '{}' is not key=value", word));
    const std::string_view key = word.substr(0, eq);
    const std::string_view value = word.substr(eq + 1);
    if (std::find(seen.begin(), seen.end(), key) != seen.end())
      bad(fmt::format("metadata key '{}' is given twice", key));
    seen.push_back(key);
    if (key == "kind") {
      std::string kind;
      for (std::size_t i = 0; i < value.size(); ++i) {
        if (value[i] != '%') {
          kind.push_back(value[i]);
          continue;
        }
        const int hi = i + 2 < value.size() ? hex_value(value[i + 1]) : -1;
        const int lo = hi >= 0 ? hex_value(value[i + 2]) : -1;
        if (lo < 0) bad(fmt::format("bad %-escape in kind '{}'", value));
        kind.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
      }
      if (!is_text(kind)) bad(fmt::format("kind '{}' is not valid UTF-8 text", value));
      header.kind = std::move(kind);
    } else if (key == "stages") {
      header.stages = parse_count(key, value);
    } else if (key == "microbatches") {
      header.microbatches = parse_count(key, value);
    } else if (key == "steps") {
      header.steps = parse_count(key, value);
    } else if (key == "copies") {
      header.copies = parse_count(key, value);
    } else if (key == "weight_policy") {
      try {
        header.weight_policy = parse_weight_policy(value);
      } catch (const InputError& e) {
        bad(e.what());
      }
    } else if (key == "placement") {
      std::vector<std::int32_t> placement;
      std::size_t start = 0;
      while (!value.empty() && start <= value.size()) {
        std::size_t comma = value.find(',', start);
        if (comma == std::string_view::npos) comma = value.size();
        placement.push_back(parse_int("placement", value.substr(start, comma - start)));
        start = comma + 1;
      }
      header.placement = std::move(placement);
    } else {
      bad(fmt::format(
          "unknown metadata key '{}' (expected kind, stages, microbatches, steps, weight_policy, "
          "copies or placement)",
          key));
    }
  }
}

// Older PyTorch files write the input-gradient half as B: a B(s, m) with a W(s, m) is an I.
void apply_legacy_backward_rule(std::vector<std::vector<Action>>& devices) {
  auto key = [](const Action& a) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a.stage)) << 32) |
           static_cast<std::uint32_t>(a.microbatch);
  };
  std::vector<std::uint64_t> weight_halves;
  for (const auto& list : devices)
    for (const Action& a : list)
      if (a.kind == ActionKind::W) weight_halves.push_back(key(a));
  if (weight_halves.empty()) return;
  std::sort(weight_halves.begin(), weight_halves.end());
  for (auto& list : devices)
    for (Action& a : list)
      if (a.kind == ActionKind::B && a.overlap == Overlap::none &&  // a pair's B is a full one
          std::binary_search(weight_halves.begin(), weight_halves.end(), key(a)))
        a.kind = ActionKind::I;
}

}  // namespace

std::string metadata_header(const Schedule& s) {
  std::string out = fmt::format("# {} kind=", kScheduleFormatTag);
  for (char c : s.kind) {
    if (is_plain_kind_char(c)) {
      out.push_back(c);
    } else {
      out += fmt::format("%{:02X}", static_cast<unsigned char>(c));
    }
  }
  out +=
      fmt::format(" stages={} microbatches={} steps={} weight_policy={} placement={}", s.stages,
                  s.microbatches, s.steps, to_string(s.weight_policy), fmt::join(s.placement, ","));
  if (s.copies != 1) out += fmt::format(" copies={}", s.copies);
  return out;
}

Schedule parse_rows(std::string_view content, const RowsDialect& dialect, std::string_view source) {
  Header header;
  Schedule s;
  std::vector<std::int64_t> device_lines;  // line number of each device's row
  std::vector<Cell> cells;
  std::int64_t line_no = 0;
  std::size_t pos = 0;
  while (pos < content.size()) {
    std::size_t end = content.find('\n', pos);
    if (end == std::string_view::npos) end = content.size();
    const std::string_view line = content.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    const std::string_view trimmed = trim(line);
    if (trimmed.empty()) continue;
    if (trimmed.front() == '#') {
      const std::string_view body = trim(trimmed.substr(1));
      if (body.substr(0, 14) != "paci.schedule/") continue;  // an ordinary comment
      const std::string where = fmt::format("{}: {} {}", source, dialect.line_word, line_no);
      if (header.line != 0)
        throw InputError(fmt::format("{}: second metadata header (the first is on {} {})", where,
                                     dialect.line_word, header.line));
      if (!s.devices.empty())
        throw InputError(fmt::format("{}: the metadata header must come before the device {}s",
                                     where, dialect.line_word));
      header.line = line_no;
      parse_header(body, header, where);
      continue;
    }
    dialect.split(line, cells);
    auto& actions = s.devices.emplace_back();
    actions.reserve(cells.size());
    for (const Cell& cell : cells) {
      try {
        parse_token(cell.text, actions);
      } catch (const InputError& e) {
        fail(source, fmt::format("{} {}, {} {}: {}", dialect.line_word, line_no, dialect.token_word,
                                 cell.index, e.what()));
      }
    }
    device_lines.push_back(line_no);
  }
  if (s.devices.empty())
    fail(source, fmt::format("no device {}s (expected one {} of actions per device)",
                             dialect.line_word, dialect.line_word));

  apply_legacy_backward_rule(s.devices);

  s.kind = header.kind.value_or("custom");
  s.weight_policy = header.weight_policy.value_or(WeightPolicy::current);
  s.copies = header.copies.value_or(1);
  std::int64_t max_stage = -1, max_microbatch = -1;
  std::size_t total_actions = 0;
  for (const auto& list : s.devices) {
    total_actions += list.size();
    for (const Action& a : list) {
      max_stage = std::max<std::int64_t>(max_stage, a.stage);
      if (a.kind != ActionKind::U)
        max_microbatch = std::max<std::int64_t>(max_microbatch, a.microbatch);
    }
  }

  // Stages: the header's, else one more than the largest stage index.
  const std::int64_t stages = header.stages ? *header.stages : max_stage + 1;  // >= 0

  // Placement: the header's, else each stage lives on the device whose row it appears in.
  if (header.placement) {
    s.placement = std::move(*header.placement);
  } else {
    // At most total_actions distinct stages appear, so a larger count leaves one missing below.
    const std::int64_t tracked = std::min<std::int64_t>(stages, total_actions + 1);
    std::vector<std::int32_t> owner(static_cast<std::size_t>(tracked), -1);
    for (std::size_t d = 0; d < s.devices.size(); ++d) {
      for (const Action& a : s.devices[d]) {
        if (a.stage >= tracked) continue;  // beyond the header's stage count: validate() reports it
        std::int32_t& o = owner[static_cast<std::size_t>(a.stage)];
        if (o < 0) {
          o = static_cast<std::int32_t>(d);
        } else if (o != static_cast<std::int32_t>(d)) {
          fail(source, fmt::format("stage {} appears on two devices: {} {} (device {}) and {} {} "
                                   "(device {}); a stage lives on one device",
                                   a.stage, dialect.line_word, device_lines[o], o,
                                   dialect.line_word, device_lines[d], d));
        }
      }
    }
    for (std::int64_t stage = 0; stage < tracked; ++stage)
      if (owner[static_cast<std::size_t>(stage)] < 0)
        fail(source,
             fmt::format("stage {} has no actions, but the schedule has {} stages", stage, stages));
    s.placement = std::move(owner);
  }
  if (static_cast<std::int64_t>(s.placement.size()) != stages)
    fail(source,
         fmt::format("placement lists {} stages, schedule has {}", s.placement.size(), stages));
  s.stages = static_cast<std::int32_t>(stages);  // == placement size: fits
  // Check counts and placement before inferring more, with provisional step and batch counts.
  s.steps = header.steps.value_or(1);
  s.microbatches = header.microbatches.value_or(1);
  check_metadata_in(s, source);

  // Steps: the header's, else the number of U actions per stage; none at all means one step
  // whose U (run by PyTorch after the schedule) is appended to each device.
  if (!header.steps) {
    std::vector<std::int64_t> updates(s.placement.size(), 0);
    for (const auto& list : s.devices)
      for (const Action& a : list)
        if (a.kind == ActionKind::U && a.stage < s.stages) ++updates[a.stage];
    if (std::all_of(updates.begin(), updates.end(), [](std::int64_t n) { return n == 0; })) {
      s.steps = 1;
      for (std::int32_t stage = 0; stage < s.stages; ++stage)  // placement checked above
        s.devices[s.placement[stage]].push_back(Action{ActionKind::U, stage, -1});
    } else {
      for (std::int32_t stage = 1; stage < s.stages; ++stage)
        if (updates[stage] != updates[0])
          fail(source, fmt::format("stages have different numbers of optimizer steps (U actions): "
                                   "stage 0 has {}, stage {} has {}",
                                   updates[0], stage, updates[stage]));
      if (updates[0] > INT32_MAX) fail(source, "too many U actions");
      s.steps = static_cast<std::int32_t>(updates[0]);
    }
  }

  // Micro-batches per step: the header's, else all micro-batch indices split evenly over steps.
  if (!header.microbatches) {
    const std::int64_t total = max_microbatch + 1;
    if (total % s.steps != 0)
      fail(source, fmt::format("micro-batch indices 0..{} ({} micro-batches) do not split evenly "
                               "into {} optimizer steps",
                               max_microbatch, total, s.steps));
    if (total / s.steps > INT32_MAX) fail(source, "too many micro-batches");
    s.microbatches = static_cast<std::int32_t>(total / s.steps);
  }

  check_metadata_in(s, source);
  return s;
}

}  // namespace paci::detail
