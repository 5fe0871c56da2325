// Chrome trace (JSON Object Format) of a Timeline: the one writer that the simulator (predicted)
// and the executor (measured) share, so their traces line up lane by lane (docs/traces.md), and
// check_trace, the structural checker that their tests run over what this writer produces.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "traces/timeline.hpp"

namespace paci {

inline constexpr std::string_view kChromeTraceFormatTag = "paci.trace/1";

// Lanes inside one device's process (Chrome pid = device index). Chrome tid:
//   0        compute (every ComputeSlice of the device)
//   1 + 2·p  "send → dev p": messages this device sends to device p
//   2 + 2·p  "recv ← dev p": messages this device receives from device p
// thread_sort_index equals the tid, so compute comes first and each peer's pair stays together.
inline constexpr std::int32_t kComputeTid = 0;
constexpr std::int32_t send_tid(std::int32_t peer) {
  return 1 + 2 * peer;
}
constexpr std::int32_t recv_tid(std::int32_t peer) {
  return 2 + 2 * peer;
}

// The whole trace as one string: {"displayTimeUnit":"ms","traceEvents":[...],"otherData":{...}},
// one event per line, metadata first, then every other event sorted by timestamp. Timestamps are
// microseconds with nanosecond resolution (times are rounded to whole ns first). Deterministic:
// the same Timeline gives the same bytes. Throws std::invalid_argument on a device outside
// 0 … 2^20-1, a negative stage, a non-finite or out-of-range time (beyond ±9e9 s), or a slice
// that ends before it starts. Partially overlapping slices are written as they are (check_trace
// reports them).
std::string chrome_trace_json(const Timeline& timeline);

// Writes chrome_trace_json(timeline) to `path` atomically, or to standard output for "-".
void write_chrome_trace(const Timeline& timeline, const std::string& path);

// Structural problems of a parsed trace (empty = fine): top level and "otherData.format";
// metadata before every other event and the rest sorted by ts; on each (pid, tid) lane the "X"
// slices nest (no partial overlap, compared in whole ns); every flow "s" has exactly one "f" with
// the same id, name and cat, the "f" binds to its enclosing slice ("bp":"e"), each lies within an
// "X" slice of its lane, and the pair follows the lane scheme above (s on pid a, tid send_tid(b);
// f on pid b, tid recv_tid(a)); process_name for every pid used and thread_name for every lane
// used; counters carry numeric args; instants have a scope. At most 100 problems are listed.
std::vector<std::string> check_trace(const nlohmann::json& trace);

// check_trace on raw text, plus what parsing hides: the text must be valid JSON whose first key
// is "displayTimeUnit".
std::vector<std::string> check_trace_text(std::string_view text);

}  // namespace paci
