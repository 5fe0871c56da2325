// ActionIndex construction (range, placement and duplicate checks) and the marked grid printer.
#include "schedules/index.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <set>

namespace paci {

ActionIndex::ActionIndex(const Schedule& s)
    : stages_(s.stages), total_microbatches_(s.total_microbatches()) {
  offsets_.assign(s.devices.size() + 1, 0);
  for (std::size_t d = 0; d < s.devices.size(); ++d)
    offsets_[d + 1] = offsets_[d] + static_cast<std::int64_t>(s.devices[d].size());
  if (offsets_.back() >= INT32_MAX)
    throw InputError(fmt::format("{} actions is too many", offsets_.back()));
  // Every stage runs at least an F of every micro-batch: a schedule claiming more (stage,
  // micro-batch) pairs than it has actions is incomplete, and its table would be sized by the claim
  // (an action "0F777777777" alone would ask for gigabytes).
  // (Two copies: each stage runs half of them.)
  if (stages_ > 0 && total_microbatches_ / s.copies > offsets_.back() / stages_)
    throw ScheduleError(fmt::format("incomplete: {} micro-batches (M {} x N {}) on {} stage{} need "
                                    "a forward each per stage, more than the {} actions it has",
                                    total_microbatches_, s.microbatches, s.steps, stages_,
                                    stages_ == 1 ? "" : "s", offsets_.back()),
                        {});
  slots_.assign(static_cast<std::size_t>(4 * stages_ * total_microbatches_), -1);
  for (std::int32_t d = 0; d < s.num_devices(); ++d) {
    const auto& list = s.devices[static_cast<std::size_t>(d)];
    for (std::size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      const ActionPos here{d, static_cast<std::int64_t>(i)};
      if (a.stage < 0 || a.stage >= stages_)
        throw ScheduleError(fmt::format("action {} on device {}: stage {} out of range (0..{})",
                                        to_string(a), d, a.stage, stages_ - 1),
                            {here});
      if (s.placement[static_cast<std::size_t>(a.stage)] != d)
        throw ScheduleError(
            fmt::format("action {} is on device {}, but stage {} is placed on device {}",
                        to_string(a), d, a.stage, s.placement[static_cast<std::size_t>(a.stage)]),
            {here});
      if (a.kind == ActionKind::U) continue;
      if (a.microbatch < 0 || a.microbatch >= total_microbatches_)
        throw ScheduleError(
            fmt::format("action {} on device {}: micro-batch {} out of range (0..{})", to_string(a),
                        d, a.microbatch, total_microbatches_ - 1),
            {here});
      if (s.copy_of_stage(a.stage) != s.copy_of_microbatch(a.microbatch)) {
        const std::int32_t c = s.copy_of_microbatch(a.microbatch), S = s.stages_per_copy();
        throw ScheduleError(
            fmt::format("action {} on device {}: micro-batch {} runs on copy {} (stages {}..{}), "
                        "stage {} is copy {}'s",
                        to_string(a), d, a.microbatch, c, c * S, c * S + S - 1, a.stage,
                        s.copy_of_stage(a.stage)),
            {here});
      }
      auto& slot = slots_[static_cast<std::size_t>(this->slot(a))];
      const std::int64_t id = offsets_[static_cast<std::size_t>(d)] + static_cast<std::int64_t>(i);
      if (slot >= 0)
        throw ScheduleError(fmt::format("action {} appears twice", to_string(a)),
                            {position(slot), here});
      slot = static_cast<std::int32_t>(id);
    }
  }
}

std::int64_t ActionIndex::vertex(const Action& a) const {
  if (a.kind == ActionKind::U || a.stage < 0 || a.stage >= stages_ || a.microbatch < 0 ||
      a.microbatch >= total_microbatches_)
    return -1;
  return slots_[static_cast<std::size_t>(slot(a))];
}

ActionPos ActionIndex::position(std::int64_t vertex) const {
  const auto it = std::upper_bound(offsets_.begin(), offsets_.end(), vertex);
  const auto device = static_cast<std::int32_t>(it - offsets_.begin() - 1);
  return {device, vertex - offsets_[static_cast<std::size_t>(device)]};
}

std::string render_grid(const Schedule& s, const std::vector<ActionPos>& marked) {
  constexpr std::int64_t kContext = 4;
  constexpr std::int64_t kMaxUnmarked = 16;
  std::int64_t longest = 0;
  std::size_t width = 3;
  for (const auto& list : s.devices) {
    longest = std::max<std::int64_t>(longest, static_cast<std::int64_t>(list.size()));
    for (const Action& a : list) width = std::max(width, to_string(a).size());
  }
  // Columns to show: windows around the marks, or the first few when nothing is marked.
  std::set<std::int64_t> columns;
  for (const ActionPos& p : marked)
    for (std::int64_t c = p.index - kContext; c <= p.index + kContext; ++c)
      if (c >= 0 && c < longest) columns.insert(c);
  if (marked.empty())
    for (std::int64_t c = 0; c < std::min(longest, kMaxUnmarked); ++c) columns.insert(c);
  auto is_marked = [&](std::int32_t d, std::int64_t c) {
    return std::find(marked.begin(), marked.end(), ActionPos{d, c}) != marked.end();
  };
  const std::size_t cell = width + 3;
  std::string out = fmt::format("{:>8}", "");
  std::int64_t previous = -1;
  for (std::int64_t c : columns) {
    if (c != previous + 1) out += fmt::format("{:^5}", "...");
    out += fmt::format("{:^{}}", c, cell);
    previous = c;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  out += '\n';
  for (std::int32_t d = 0; d < s.num_devices(); ++d) {
    const auto& list = s.devices[static_cast<std::size_t>(d)];
    std::string row = fmt::format("{:<8}", fmt::format("dev {}", d));
    std::string arrows(8, ' ');
    bool any = false;
    previous = -1;
    for (std::int64_t c : columns) {
      if (c != previous + 1) {
        row += fmt::format("{:^5}", "...");
        arrows += std::string(5, ' ');
      }
      previous = c;
      std::string text;
      if (c < static_cast<std::int64_t>(list.size()))
        text = to_string(list[static_cast<std::size_t>(c)]);
      const bool mark = is_marked(d, c);
      any = any || mark;
      row += fmt::format("{:^{}}", mark ? ">" + text + "<" : text, cell);
      arrows += fmt::format("{:^{}}", mark ? std::string(text.size(), '^') : "", cell);
    }
    if (previous + 1 < static_cast<std::int64_t>(list.size())) row += " ...";
    while (!row.empty() && row.back() == ' ') row.pop_back();
    out += row + '\n';
    if (any) {
      while (!arrows.empty() && arrows.back() == ' ') arrows.pop_back();
      out += arrows + '\n';
    }
  }
  return out;
}

}  // namespace paci
