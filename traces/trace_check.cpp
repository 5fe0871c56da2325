// check_trace: the structural checker of Chrome traces that the writer's, the simulator's and the
// executor's tests share — slices nest per lane, every flow start has exactly one end inside a
// slice of the right lane, metadata names every lane used.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "traces/chrome_trace.hpp"

namespace paci {

namespace {

constexpr std::size_t kMaxProblems = 100;  // check_trace lists at most this many
constexpr double kMaxAbsSeconds = 9.0e9;   // whole ns of ±9e9 s fit in int64 (as the writer)

class Problems {
 public:
  template <typename... Args>
  void add(fmt::format_string<Args...> format, Args&&... args) {
    ++count_;
    if (list_.size() < kMaxProblems)
      list_.push_back(fmt::format(format, std::forward<Args>(args)...));
  }
  std::vector<std::string> take() {
    if (count_ > list_.size())
      list_.push_back(fmt::format("... and {} more problems", count_ - list_.size()));
    return std::move(list_);
  }

 private:
  std::vector<std::string> list_;
  std::size_t count_ = 0;
};

// µs (JSON number) to whole ns, the resolution Perfetto keeps.
std::optional<std::int64_t> json_ns(const nlohmann::json& value) {
  if (!value.is_number()) return std::nullopt;
  const double us = value.get<double>();
  if (!std::isfinite(us) || std::fabs(us) > kMaxAbsSeconds * 1e6) return std::nullopt;
  return std::llround(us * 1000.0);
}

std::string json_name(const nlohmann::json& event) {
  const auto it = event.find("name");
  return it != event.end() && it->is_string() ? it->get<std::string>() : std::string("?");
}

struct Slice {
  std::int64_t start = 0;
  std::int64_t end = 0;
  std::size_t event = 0;
};

struct Lane {
  std::vector<Slice> slices;          // sorted by (start, -end) after the first pass
  std::vector<std::int64_t> max_end;  // running maximum of end over slices[0..i]

  // True when some slice of the lane has start <= ts <= end.
  bool contains(std::int64_t ts) const {
    auto it = std::upper_bound(slices.begin(), slices.end(), ts,
                               [](std::int64_t t, const Slice& s) { return t < s.start; });
    for (auto i = static_cast<std::ptrdiff_t>(it - slices.begin()) - 1;
         i >= 0 && max_end[static_cast<std::size_t>(i)] >= ts; --i)
      if (slices[static_cast<std::size_t>(i)].end >= ts) return true;
    return false;
  }
};

struct FlowEnd {
  std::size_t event = 0;
  std::int64_t pid = 0;
  std::int64_t tid = 0;
  std::int64_t ts = 0;
  std::string name;
  std::string cat;
};

struct Flow {
  std::vector<FlowEnd> starts;
  std::vector<FlowEnd> ends;
};

using LaneKey = std::pair<std::int64_t, std::int64_t>;  // (pid, tid)

}  // namespace

std::vector<std::string> check_trace(const nlohmann::json& trace) {
  Problems problems;
  if (!trace.is_object()) {
    problems.add("trace is not a JSON object");
    return problems.take();
  }
  const auto unit = trace.find("displayTimeUnit");
  if (unit == trace.end() || !unit->is_string() || (*unit != "ms" && *unit != "ns"))
    problems.add("displayTimeUnit missing or not \"ms\"/\"ns\"");
  const auto other = trace.find("otherData");
  if (other == trace.end() || !other->is_object() || !other->contains("format") ||
      (*other)["format"] != kChromeTraceFormatTag)
    problems.add("otherData.format is not \"{}\"", kChromeTraceFormatTag);
  const auto events_it = trace.find("traceEvents");
  if (events_it == trace.end() || !events_it->is_array()) {
    problems.add("traceEvents missing or not an array");
    return problems.take();
  }
  const nlohmann::json& events = *events_it;

  std::map<LaneKey, Lane> lanes;
  std::map<std::string, Flow> flows;  // by id, dumped
  std::set<std::int64_t> named_pids;
  std::set<LaneKey> named_lanes;
  std::set<std::int64_t> used_pids;
  std::set<LaneKey> used_lanes;
  bool seen_non_metadata = false;
  std::int64_t previous_ts = std::numeric_limits<std::int64_t>::min();

  for (std::size_t i = 0; i < events.size(); ++i) {
    const nlohmann::json& e = events[i];
    if (!e.is_object() || !e.contains("ph") || !e["ph"].is_string()) {
      problems.add("event {}: not an object with a string \"ph\"", i);
      continue;
    }
    const std::string ph = e["ph"].get<std::string>();
    const std::string name = json_name(e);
    const auto pid_it = e.find("pid");
    const auto tid_it = e.find("tid");
    const bool has_pid = pid_it != e.end() && pid_it->is_number_integer();
    const bool has_tid = tid_it != e.end() && tid_it->is_number_integer();
    const std::int64_t pid = has_pid ? pid_it->get<std::int64_t>() : 0;
    const std::int64_t tid = has_tid ? tid_it->get<std::int64_t>() : 0;

    if (ph == "M") {
      if (seen_non_metadata) problems.add("event {}: metadata \"{}\" after other events", i, name);
      if (!has_pid) problems.add("event {}: metadata \"{}\" without an integer pid", i, name);
      const auto args = e.find("args");
      const bool named = args != e.end() && args->is_object() && args->contains("name") &&
                         (*args)["name"].is_string();
      if (name == "process_name") {
        if (named)
          named_pids.insert(pid);
        else
          problems.add("event {}: process_name without args.name", i);
      } else if (name == "thread_name") {
        if (named && has_tid)
          named_lanes.emplace(pid, tid);
        else
          problems.add("event {}: thread_name without tid or args.name", i);
      }
      continue;
    }
    seen_non_metadata = true;

    const auto ts = e.contains("ts") ? json_ns(e["ts"]) : std::nullopt;
    if (!ts) {
      problems.add("event {} (\"{}\", ph {}): missing or bad ts", i, name, ph);
      continue;
    }
    if (*ts < previous_ts)
      problems.add("event {} (\"{}\", ph {}): ts {} ns before the previous event's {} ns", i, name,
                   ph, *ts, previous_ts);
    previous_ts = std::max(previous_ts, *ts);
    if (!has_pid || (ph != "C" && !has_tid)) {
      problems.add("event {} (\"{}\", ph {}): missing integer pid or tid", i, name, ph);
      continue;
    }
    used_pids.insert(pid);

    if (ph == "X") {
      const auto dur = e.contains("dur") ? json_ns(e["dur"]) : std::nullopt;
      if (!dur || *dur < 0) {
        problems.add("event {} (\"{}\"): X without a non-negative dur", i, name);
        continue;
      }
      lanes[{pid, tid}].slices.push_back({*ts, *ts + *dur, i});
      used_lanes.emplace(pid, tid);
    } else if (ph == "s" || ph == "f") {
      if (!e.contains("id") || !(e["id"].is_number_integer() || e["id"].is_string())) {
        problems.add("event {} (\"{}\", ph {}): flow without an integer or string id", i, name, ph);
        continue;
      }
      if (ph == "f" && (!e.contains("bp") || e["bp"] != "e"))
        problems.add("event {} (\"{}\"): flow end without \"bp\":\"e\"", i, name);
      const auto cat_it = e.find("cat");
      FlowEnd end{i,    pid,
                  tid,  *ts,
                  name, cat_it != e.end() && cat_it->is_string() ? cat_it->get<std::string>() : ""};
      Flow& flow = flows[e["id"].dump()];
      (ph == "s" ? flow.starts : flow.ends).push_back(std::move(end));
      used_lanes.emplace(pid, tid);
    } else if (ph == "C") {
      const auto args = e.find("args");
      bool numeric = args != e.end() && args->is_object() && !args->empty();
      if (numeric)
        for (const auto& value : *args) numeric = numeric && value.is_number();
      if (!numeric) problems.add("event {} (\"{}\"): counter without numeric args", i, name);
    } else if (ph == "i" || ph == "I") {
      const auto scope = e.find("s");
      if (scope == e.end() || !scope->is_string() ||
          (*scope != "t" && *scope != "p" && *scope != "g"))
        problems.add("event {} (\"{}\"): instant without scope \"t\", \"p\" or \"g\"", i, name);
      else if (*scope == "t")
        used_lanes.emplace(pid, tid);
    } else {
      problems.add("event {} (\"{}\"): unexpected phase \"{}\"", i, name, ph);
    }
  }

  // Nesting: on each lane, a slice either starts at or after the open one ends, or lies inside it.
  for (auto& [key, lane] : lanes) {
    std::sort(lane.slices.begin(), lane.slices.end(), [](const Slice& a, const Slice& b) {
      return std::tie(a.start, b.end, a.event) < std::tie(b.start, a.end, b.event);
    });
    std::vector<const Slice*> open;
    lane.max_end.reserve(lane.slices.size());
    std::int64_t max_end = std::numeric_limits<std::int64_t>::min();
    for (const Slice& slice : lane.slices) {
      max_end = std::max(max_end, slice.end);
      lane.max_end.push_back(max_end);
      while (!open.empty() && open.back()->end <= slice.start) open.pop_back();
      if (!open.empty() && slice.end > open.back()->end) {
        const Slice& outer = *open.back();
        problems.add(
            "pid {} tid {}: slice \"{}\" [{}, {}] ns partially overlaps \"{}\" [{}, {}] ns",
            key.first, key.second, json_name(events[slice.event]), slice.start, slice.end,
            json_name(events[outer.event]), outer.start, outer.end);
        continue;  // keep the outer one open; the overlapping one is reported
      }
      open.push_back(&slice);
    }
  }

  // Flows: exactly one start and one end per id, matching, inside slices, on the lane scheme.
  auto inside_slice = [&](const FlowEnd& end) {
    const auto lane = lanes.find({end.pid, end.tid});
    return lane != lanes.end() && lane->second.contains(end.ts);
  };
  for (const auto& [id, flow] : flows) {
    if (flow.starts.size() != 1 || flow.ends.size() != 1) {
      problems.add("flow id {}: {} \"s\" and {} \"f\" events (expected one each)", id,
                   flow.starts.size(), flow.ends.size());
      continue;
    }
    const FlowEnd& s = flow.starts.front();
    const FlowEnd& f = flow.ends.front();
    if (s.name != f.name || s.cat != f.cat)
      problems.add("flow id {}: \"s\" is \"{}\" ({}) but \"f\" is \"{}\" ({})", id, s.name, s.cat,
                   f.name, f.cat);
    if (!inside_slice(s))
      problems.add("flow id {} (\"{}\"): \"s\" at {} ns is inside no slice of pid {} tid {}", id,
                   s.name, s.ts, s.pid, s.tid);
    if (!inside_slice(f))
      problems.add("flow id {} (\"{}\"): \"f\" at {} ns is inside no slice of pid {} tid {}", id,
                   f.name, f.ts, f.pid, f.tid);
    if (s.tid != 1 + 2 * f.pid || f.tid != 2 + 2 * s.pid)
      problems.add(
          "flow id {} (\"{}\"): from pid {} tid {} to pid {} tid {}; expected the send lane "
          "tid {} and the recv lane tid {}",
          id, s.name, s.pid, s.tid, f.pid, f.tid, 1 + 2 * f.pid, 2 + 2 * s.pid);
  }

  for (const std::int64_t pid : used_pids)
    if (!named_pids.contains(pid)) problems.add("pid {} has no process_name", pid);
  for (const LaneKey& lane : used_lanes)
    if (!named_lanes.contains(lane))
      problems.add("pid {} tid {} has no thread_name", lane.first, lane.second);
  return problems.take();
}

std::vector<std::string> check_trace_text(std::string_view text) {
  std::vector<std::string> problems;
  std::size_t pos = text.find_first_not_of(" \t\r\n");
  if (pos != std::string_view::npos && text[pos] == '{')
    pos = text.find_first_not_of(" \t\r\n", pos + 1);
  else
    pos = std::string_view::npos;
  constexpr std::string_view kFirstKey = "\"displayTimeUnit\"";
  if (pos == std::string_view::npos || text.substr(pos, kFirstKey.size()) != kFirstKey)
    problems.emplace_back("the first key of the trace object is not \"displayTimeUnit\"");
  const nlohmann::json trace = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (trace.is_discarded()) {
    problems.emplace_back("the trace is not valid JSON");
    return problems;
  }
  for (std::string& problem : check_trace(trace)) problems.push_back(std::move(problem));
  return problems;
}

}  // namespace paci
