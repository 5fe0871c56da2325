// CSV and text schedules: their writers (metadata header, then one row or line per device) and
// their tokenizers, which feed the shared rows reader in format_rows.cpp. CSV cells are trimmed
// and empty cells (PyTorch's idle slots) skipped; text tokens split on whitespace or commas.
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "base/errors.hpp"
#include "schedules/format_rows.hpp"
#include "schedules/formats.hpp"

namespace paci::detail {

namespace {

// Cell C is the C-th comma-separated field of the row, counting empty ones.
void split_csv(std::string_view line, std::vector<Cell>& cells) {
  cells.clear();
  std::int32_t index = 0;
  std::size_t pos = 0;
  while (true) {
    const std::size_t comma = line.find(',', pos);
    const std::size_t end = comma == std::string_view::npos ? line.size() : comma;
    ++index;
    const std::string_view text = trim(line.substr(pos, end - pos));
    if (!text.empty()) cells.push_back(Cell{text, index});
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
}

// Token T is the T-th non-empty token of the line.
void split_text(std::string_view line, std::vector<Cell>& cells) {
  cells.clear();
  auto separator = [](char c) { return c == ',' || is_space(c); };
  std::int32_t index = 0;
  std::size_t pos = 0;
  while (pos < line.size()) {
    while (pos < line.size() && separator(line[pos])) ++pos;
    const std::size_t begin = pos;
    while (pos < line.size() && !separator(line[pos])) ++pos;
    if (pos > begin) cells.push_back(Cell{line.substr(begin, pos - begin), ++index});
  }
}

constexpr RowsDialect kCsv{"row", "cell", split_csv};
constexpr RowsDialect kText{"line", "token", split_text};

// Header line, then one line per device with actions joined by `separator`. A device without
// actions is written as "," (a non-blank line with no tokens) so that it survives a round trip.
std::string write_rows(const Schedule& s, char separator) {
  std::string out;
  out.reserve(256 + s.placement.size() * 4 + s.devices.size() * 2 + s.num_actions() * 12);
  out += metadata_header(s);
  out.push_back('\n');
  for (const auto& list : s.devices) {
    if (list.empty()) out.push_back(',');
    for (std::size_t i = 0; i < list.size();) {
      if (i > 0) out.push_back(separator);
      i += append_cell(out, list, i);
    }
    out.push_back('\n');
  }
  return out;
}

}  // namespace

std::string write_csv(const Schedule& schedule) {
  return write_rows(schedule, ',');
}
std::string write_text(const Schedule& schedule) {
  return write_rows(schedule, ' ');
}

std::string write_pytorch_csv(const Schedule& s) {
  if (const std::string why = paci::pytorch_refusal(s); !why.empty()) throw InputError(why);
  std::string out;
  for (const auto& list : s.devices) {
    bool first = true;
    for (std::size_t i = 0; i < list.size();) {
      if (list[i].kind == ActionKind::U) {
        ++i;
        continue;
      }
      if (!first) out.push_back(',');
      first = false;
      i += append_cell(out, list, i);
    }
    out.push_back('\n');
  }
  return out;
}

Schedule parse_csv(std::string_view content, std::string_view source) {
  return parse_rows(content, kCsv, source);
}

Schedule parse_text(std::string_view content, std::string_view source) {
  return parse_rows(content, kText, source);
}

}  // namespace paci::detail

namespace paci {

std::string pytorch_two_copies_refusal(std::string_view kind) {
  return fmt::format(
      "PyTorch's pipelining cannot run a {} schedule: it holds two copies of the model, each "
      "taking half the micro-batches in at its own end, and PyTorch's runtime has one (its "
      "DualPipeV is the one-copy form: --kind dualpipev)",
      kind);
}

std::string pytorch_refusal(const Schedule& s) {
  if (s.copies > 1) return pytorch_two_copies_refusal(s.kind);
  if (s.weight_policy != WeightPolicy::current)
    return fmt::format(
        "PyTorch's pipelining cannot run a {} schedule: its backward reads stashed weights ({}), "
        "and PyTorch keeps one version of each stage's weights",
        s.kind, to_string(s.weight_policy));
  if (s.steps != 1)
    return fmt::format(
        "PyTorch's pipelining cannot run a {} schedule: it updates weights inside the schedule "
        "({} optimizer steps without a flush), and PyTorch runs the optimizer after a whole "
        "schedule",
        s.kind, s.steps);
  // PyTorch's runtime takes each stage's rank from the rows: looped (stage s on rank s mod P,
  // its interleaved schedules) or V-shaped (2P stages, stages s and 2P - 1 - s on rank s, its
  // ZB-V), as torch.distributed.pipelining._utils.generate_stage_to_rank_mapping makes them.
  const auto devices = static_cast<std::int32_t>(s.devices.size());
  const auto on = [&](std::int32_t stage) { return s.placement[static_cast<std::size_t>(stage)]; };
  bool loop = true, v = s.stages == 2 * devices;
  for (std::int32_t stage = 0; stage < s.stages; ++stage) {
    loop = loop && on(stage) == stage % devices;
    v = v && on(stage) == (stage < devices ? stage : 2 * devices - 1 - stage);
  }
  if (!loop && !v)
    return fmt::format(
        "PyTorch's pipelining cannot run this {} schedule: its stages are neither looped (stage s "
        "on rank s mod {}) nor V-shaped, the two placements PyTorch's runtime makes",
        s.kind, devices);
  for (std::size_t d = 0; d < s.devices.size(); ++d) {
    bool updated = false;
    for (const Action& a : s.devices[d]) {
      if (a.kind == ActionKind::U)
        updated = true;
      else if (updated)
        return fmt::format(
            "PyTorch's pipelining cannot run this {} schedule: device {} computes after an "
            "optimizer step, and PyTorch steps the optimizer after the whole schedule",
            s.kind, d);
    }
  }
  return "";
}

}  // namespace paci
