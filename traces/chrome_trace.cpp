// Chrome trace writer: streams a Timeline as Chrome's JSON Object Format (pid = device, tid =
// compute / send / recv lane) with compiled fmt formats into one reserved string. The checker
// the tests share is in trace_check.cpp.
#include "traces/chrome_trace.hpp"

#include <fmt/compile.h>
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "schedules/formats.hpp"

namespace paci {
namespace {

constexpr double kMaxAbsSeconds = 9.0e9;             // whole ns of ±9e9 s fit in int64
constexpr std::int32_t kMaxDevices = 1 << 20;        // pid and tid must fit the sort key
constexpr std::size_t kBytesPerEventEstimate = 120;  // for reserve()
constexpr std::size_t kFlushBytes = 1 << 20;         // chunk size from the buffer to the string

std::int64_t to_ns(double seconds, std::string_view what, std::size_t index) {
  if (!std::isfinite(seconds) || std::fabs(seconds) > kMaxAbsSeconds)
    throw std::invalid_argument(
        fmt::format("chrome trace: {} #{} has time {} s; expected a finite time within ±9e9 s",
                    what, index, seconds));
  return std::llround(seconds * 1e9);
}

void check_device(std::int32_t device, std::string_view what, std::size_t index) {
  if (device < 0 || device >= kMaxDevices)
    throw std::invalid_argument(fmt::format("chrome trace: {} #{} has device {}; expected 0 … {}",
                                            what, index, device, kMaxDevices - 1));
}

void check_order(std::int64_t start, std::int64_t end, std::string_view what, std::size_t index) {
  if (end < start)
    throw std::invalid_argument(fmt::format(
        "chrome trace: {} #{} ends ({} ns) before it starts ({} ns)", what, index, end, start));
}

// A JSON string literal of arbitrary text (invalid UTF-8 replaced, never thrown on).
std::string json_string(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Formats into a small buffer and moves it to the output string in large chunks: cheaper than
// formatting through a back_insert_iterator of the string.
class Sink {
 public:
  explicit Sink(std::string& out) : out_(out) {}
  fmt::appender it() { return fmt::appender(buffer_); }
  void text(std::string_view s) { buffer_.append(s.data(), s.data() + s.size()); }
  void maybe_flush() {
    if (buffer_.size() >= kFlushBytes) flush();
  }
  void flush() {
    out_.append(buffer_.data(), buffer_.size());
    buffer_.clear();
  }

 private:
  std::string& out_;
  fmt::memory_buffer buffer_;
};

// Microseconds with nanosecond resolution, shortest exact decimal: 250000, 1.5, 1234.568.
void append_us(Sink& sink, std::int64_t ns) {
  if (ns < 0) {
    sink.text("-");
    ns = -ns;  // |ns| <= 9e18: no overflow
  }
  const std::int64_t whole = ns / 1000;
  const std::int64_t frac = ns % 1000;
  if (frac == 0)
    fmt::format_to(sink.it(), FMT_COMPILE("{}"), whole);
  else if (frac % 100 == 0)
    fmt::format_to(sink.it(), FMT_COMPILE("{}.{}"), whole, frac / 100);
  else if (frac % 10 == 0)
    fmt::format_to(sink.it(), FMT_COMPILE("{}.{:02}"), whole, frac / 10);
  else
    fmt::format_to(sink.it(), FMT_COMPILE("{}.{:03}"), whole, frac);
}

// The text form of paci::to_string(action), without a temporary string.
void append_action(Sink& sink, const Action& action) {
  if (action.kind == ActionKind::U)
    fmt::format_to(sink.it(), FMT_COMPILE("{}U"), action.stage);
  else
    fmt::format_to(sink.it(), FMT_COMPILE("{}{}{}"), action.stage, kind_letter(action.kind),
                   action.microbatch);
}

// "0F3 → 1F3": the producer, then the consumer that waits for it.
void append_message_name(Sink& sink, const MessageSlice& message) {
  append_action(sink, message.producer);
  sink.text(" → ");
  append_action(sink, message.consumer);
}

enum class EventKind : std::uint8_t {
  memory,           // "C" memory
  initial_version,  // "C" weight version, initial value (index into the initial values)
  version,          // "C" weight version after a U (index = compute slice)
  update,           // "i" at the end of a U (index = compute slice)
  compute,          // "X" compute lane
  send,             // "X" send lane (index = message)
  recv,             // "X" recv lane (index = message)
  flow_start,       // "s" on the send lane
  flow_end,         // "f" on the recv lane
  phase,            // "X" compute lane, nested in a compute slice (sorts after it at one ts)
};

// Sort ranks among events of one timestamp: counters, then instants (so an update marks the end
// of its U before the next slice opens), then slices, then flows. A flow whose ts equals its
// slice's start (a slice of 0 or 1 ns) sorts right after that slice instead, so that a viewer
// binding it to "the slice open on the lane at ts" finds its own slice.
constexpr std::uint64_t kRankCounter = 0;
constexpr std::uint64_t kRankInstant = 1;
constexpr std::uint64_t kRankSlice = 2;
constexpr std::uint64_t kRankFlow = 3;

// One output event, sorted by (ts, rank, pid, tid, kind, index, bound-flow bit), packed into two
// words and an index so that sorting tens of millions of them stays cheap:
//   time: ts in ns with the sign bit flipped (unsigned order = signed order)
//   lane: rank [58,60) | pid [38,58) | tid [16,38) | sort kind [1,5) | bound-flow bit [0]
struct Event {
  std::uint64_t time = 0;
  std::uint64_t lane = 0;
  std::uint32_t index = 0;
  EventKind kind = EventKind::memory;  // kind emitted (a bound flow sorts under its slice's)

  std::int64_t ts() const { return static_cast<std::int64_t>(time ^ (1ULL << 63)); }
  std::int32_t pid() const { return static_cast<std::int32_t>((lane >> 38) & 0xFFFFF); }
  std::int32_t tid() const { return static_cast<std::int32_t>((lane >> 16) & 0x3FFFFF); }

  friend bool operator<(const Event& a, const Event& b) {
    if (a.time != b.time) return a.time < b.time;
    if (a.lane != b.lane) return a.lane < b.lane;
    return a.index < b.index;
  }
};

Event make_event(EventKind kind, EventKind sort_kind, std::uint64_t rank, bool bound,
                 std::int64_t ts, std::int32_t pid, std::int32_t tid, std::uint32_t index) {
  Event e;
  e.time = static_cast<std::uint64_t>(ts) ^ (1ULL << 63);
  e.lane = rank << 58 | static_cast<std::uint64_t>(pid) << 38 |
           static_cast<std::uint64_t>(tid) << 16 | static_cast<std::uint64_t>(sort_kind) << 1 |
           static_cast<std::uint64_t>(bound);
  e.index = index;
  e.kind = kind;
  return e;
}

Event simple_event(EventKind kind, std::uint64_t rank, std::int64_t ts, std::int32_t pid,
                   std::int32_t tid, std::uint32_t index) {
  return make_event(kind, kind, rank, false, ts, pid, tid, index);
}

struct Times {
  std::int64_t start = 0;
  std::int64_t end = 0;
};

struct MessageTimes {
  Times send;
  Times recv;
};

// A flow event in the middle of its slice: strictly inside when the slice lasts 2 ns or more.
Event flow_event(EventKind flow_kind, EventKind slice_kind, std::int32_t pid, std::int32_t tid,
                 std::uint32_t index, const Times& slice) {
  const std::int64_t ts = slice.start + (slice.end - slice.start) / 2;
  if (ts == slice.start)
    return make_event(flow_kind, slice_kind, kRankSlice, true, ts, pid, tid, index);
  return make_event(flow_kind, flow_kind, kRankFlow, false, ts, pid, tid, index);
}

// First slice (by start, then input order) of a stage on a device: where its weight-version
// counter starts.
struct FirstSlice {
  std::int64_t start = 0;
  std::size_t index = 0;
  std::int32_t initial_version = 0;
};

struct InitialVersion {
  std::int32_t stage = 0;
  std::int32_t version = 0;
};

// "M" events: per device its name and sort index, then its lanes' names and sort indices.
void append_metadata(Sink& sink, const Timeline& timeline, std::int32_t num_pids,
                     const std::set<std::pair<std::int32_t, std::int32_t>>& peers) {
  bool first = true;
  auto open = [&]() {
    if (!first) sink.text(",\n");
    first = false;
  };
  auto peer_it = peers.begin();
  for (std::int32_t pid = 0; pid < num_pids; ++pid) {
    const auto slot = static_cast<std::size_t>(pid);
    const std::string name =
        slot < timeline.device_names.size() && !timeline.device_names[slot].empty()
            ? timeline.device_names[slot]
            : fmt::format("device {}", pid);
    open();
    fmt::format_to(sink.it(),
                   R"({{"name":"process_name","ph":"M","pid":{},"tid":0,"args":{{"name":{}}}}})",
                   pid, json_string(name));
    open();
    fmt::format_to(
        sink.it(),
        R"({{"name":"process_sort_index","ph":"M","pid":{},"tid":0,"args":{{"sort_index":{}}}}})",
        pid, pid);
    auto thread = [&](std::int32_t tid, std::string_view thread_name) {
      open();
      fmt::format_to(
          sink.it(),
          R"({{"name":"thread_name","ph":"M","pid":{},"tid":{},"args":{{"name":"{}"}}}})", pid, tid,
          thread_name);
      open();
      fmt::format_to(
          sink.it(),
          R"({{"name":"thread_sort_index","ph":"M","pid":{},"tid":{},"args":{{"sort_index":{}}}}})",
          pid, tid, tid);
    };
    thread(kComputeTid, "compute");
    for (; peer_it != peers.end() && peer_it->first == pid; ++peer_it) {
      const std::int32_t peer = peer_it->second;
      thread(send_tid(peer), fmt::format("send → dev {}", peer));
      thread(recv_tid(peer), fmt::format("recv ← dev {}", peer));
    }
  }
}

struct Sources {
  const Timeline& timeline;
  const std::vector<Times>& compute_times;
  const std::vector<Times>& phase_times;
  const std::vector<MessageTimes>& message_times;
  const std::vector<InitialVersion>& initial_versions;
};

void append_event(Sink& sink, const Sources& src, const Event& e) {
  const auto it = sink.it();
  switch (e.kind) {
    case EventKind::memory: {
      const MemorySample& sample = src.timeline.memory[e.index];
      fmt::format_to(it, FMT_COMPILE(R"({{"name":"memory","ph":"C","pid":{},"tid":0,"ts":)"),
                     e.pid());
      append_us(sink, e.ts());
      fmt::format_to(sink.it(), FMT_COMPILE(R"(,"args":{{"bytes":{}}}}})"), sample.bytes);
      return;
    }
    case EventKind::initial_version:
    case EventKind::version: {
      std::int32_t stage = 0;
      std::int32_t version = 0;
      if (e.kind == EventKind::initial_version) {
        stage = src.initial_versions[e.index].stage;
        version = src.initial_versions[e.index].version;
      } else {
        stage = src.timeline.compute[e.index].action.stage;
        version = src.timeline.compute[e.index].version;
      }
      fmt::format_to(
          it, FMT_COMPILE(R"({{"name":"weight version stage {}","ph":"C","pid":{},"tid":0,"ts":)"),
          stage, e.pid());
      append_us(sink, e.ts());
      fmt::format_to(sink.it(), FMT_COMPILE(R"(,"args":{{"version":{}}}}})"), version);
      return;
    }
    case EventKind::update: {
      const ComputeSlice& slice = src.timeline.compute[e.index];
      fmt::format_to(
          it,
          FMT_COMPILE(
              R"({{"name":"update stage {} → v{}","cat":"update","ph":"i","s":"t","pid":{},"tid":{},"ts":)"),
          slice.action.stage, slice.version, e.pid(), e.tid());
      append_us(sink, e.ts());
      fmt::format_to(sink.it(), FMT_COMPILE(R"(,"args":{{"stage":{},"version":{}}}}})"),
                     slice.action.stage, slice.version);
      return;
    }
    case EventKind::compute: {
      const ComputeSlice& slice = src.timeline.compute[e.index];
      const Times& t = src.compute_times[e.index];
      sink.text(R"({"name":")");
      append_action(sink, slice.action);
      fmt::format_to(sink.it(), FMT_COMPILE(R"(","cat":"{}","ph":"X","pid":{},"tid":{},"ts":)"),
                     kind_letter(slice.action.kind), e.pid(), e.tid());
      append_us(sink, t.start);
      sink.text(R"(,"dur":)");
      append_us(sink, t.end - t.start);
      if (slice.action.kind == ActionKind::U)
        fmt::format_to(sink.it(), FMT_COMPILE(R"(,"args":{{"stage":{},"version":{}}}}})"),
                       slice.action.stage, slice.version);
      else if (slice.action.overlap == Overlap::none)
        fmt::format_to(sink.it(), FMT_COMPILE(R"(,"args":{{"stage":{},"mb":{},"version":{}}}}})"),
                       slice.action.stage, slice.action.microbatch, slice.version);
      else  // one half of an overlapped F&B pair (DualPipe's): which half, beside its partner
        fmt::format_to(
            sink.it(),
            FMT_COMPILE(R"(,"args":{{"stage":{},"mb":{},"version":{},"pair":"F&B {}"}}}})"),
            slice.action.stage, slice.action.microbatch, slice.version,
            slice.action.overlap == Overlap::first ? "first" : "second");
      return;
    }
    case EventKind::phase: {
      const PhaseSlice& phase = src.timeline.phases[e.index];
      const Times& t = src.phase_times[e.index];
      fmt::format_to(it,
                     FMT_COMPILE(R"({{"name":{},"cat":"phase","ph":"X","pid":{},"tid":{},"ts":)"),
                     json_string(phase.name), e.pid(), e.tid());
      append_us(sink, t.start);
      sink.text(R"(,"dur":)");
      append_us(sink, t.end - t.start);
      sink.text("}");
      return;
    }
    case EventKind::send:
    case EventKind::recv: {
      const MessageSlice& message = src.timeline.messages[e.index];
      const MessageTimes& mt = src.message_times[e.index];
      const Times& t = e.kind == EventKind::send ? mt.send : mt.recv;
      sink.text(R"({"name":")");
      append_message_name(sink, message);
      fmt::format_to(sink.it(), FMT_COMPILE(R"(","cat":"{}","ph":"X","pid":{},"tid":{},"ts":)"),
                     to_string(message.kind), e.pid(), e.tid());
      append_us(sink, t.start);
      sink.text(R"(,"dur":)");
      append_us(sink, t.end - t.start);
      fmt::format_to(sink.it(), FMT_COMPILE(R"(,"args":{{"bytes":{}}}}})"), message.bytes);
      return;
    }
    case EventKind::flow_start:
    case EventKind::flow_end: {
      const MessageSlice& message = src.timeline.messages[e.index];
      sink.text(R"({"name":")");
      append_message_name(sink, message);
      if (e.kind == EventKind::flow_start)
        sink.text(R"(","cat":"flow","ph":"s",)");
      else
        sink.text(R"(","cat":"flow","ph":"f","bp":"e",)");
      fmt::format_to(sink.it(), FMT_COMPILE(R"("id":{},"pid":{},"tid":{},"ts":)"),
                     static_cast<std::uint64_t>(e.index) + 1, e.pid(), e.tid());
      append_us(sink, e.ts());
      sink.text("}");
      return;
    }
  }
}

}  // namespace

std::string chrome_trace_json(const Timeline& timeline) {
  constexpr auto kMaxIndex = static_cast<std::size_t>(std::numeric_limits<std::uint32_t>::max());
  if (timeline.compute.size() > kMaxIndex || timeline.messages.size() > kMaxIndex ||
      timeline.memory.size() > kMaxIndex || timeline.phases.size() > kMaxIndex)
    throw std::invalid_argument("chrome trace: more than 2^32-1 slices, messages or samples");
  if (timeline.num_devices < 0 || timeline.num_devices > kMaxDevices)
    throw std::invalid_argument(
        fmt::format("chrome trace: num_devices {} out of range", timeline.num_devices));

  std::int32_t num_pids = timeline.num_devices;
  std::vector<Event> events;
  std::size_t updates = 0;
  for (const ComputeSlice& slice : timeline.compute)
    if (slice.action.kind == ActionKind::U) ++updates;
  events.reserve(timeline.compute.size() + 2 * updates + 4 * timeline.messages.size() +
                 timeline.memory.size() + timeline.phases.size());

  // Compute lane, updates, and the first slice of each (device, stage).
  std::vector<Times> compute_times(timeline.compute.size());
  std::map<std::pair<std::int32_t, std::int32_t>, FirstSlice> first_slices;
  for (std::size_t i = 0; i < timeline.compute.size(); ++i) {
    const ComputeSlice& slice = timeline.compute[i];
    check_device(slice.device, "compute slice", i);
    if (slice.action.stage < 0)
      throw std::invalid_argument(
          fmt::format("chrome trace: compute slice #{} has stage {}", i, slice.action.stage));
    Times& t = compute_times[i];
    t.start = to_ns(slice.start_s, "compute slice", i);
    t.end = to_ns(slice.end_s, "compute slice", i);
    check_order(t.start, t.end, "compute slice", i);
    num_pids = std::max(num_pids, slice.device + 1);
    const auto index = static_cast<std::uint32_t>(i);
    events.push_back(
        simple_event(EventKind::compute, kRankSlice, t.start, slice.device, kComputeTid, index));
    const bool is_update = slice.action.kind == ActionKind::U;
    if (is_update) {
      events.push_back(
          simple_event(EventKind::update, kRankInstant, t.end, slice.device, kComputeTid, index));
      events.push_back(
          simple_event(EventKind::version, kRankCounter, t.end, slice.device, kComputeTid, index));
    }
    // The version before the stage's first slice: what a first F/B/I/W read, or one less than
    // what a first U made.
    const std::int32_t before = is_update ? std::max(slice.version - 1, 0) : slice.version;
    auto [pos, inserted] = first_slices.try_emplace({slice.device, slice.action.stage},
                                                    FirstSlice{t.start, i, before});
    if (!inserted && t.start < pos->second.start) pos->second = FirstSlice{t.start, i, before};
  }
  // Initial weight-version counters: at time 0 (or at the first slice, if that is earlier).
  std::vector<InitialVersion> initial_versions;
  initial_versions.reserve(first_slices.size());
  for (const auto& [key, first] : first_slices) {
    events.push_back(simple_event(EventKind::initial_version, kRankCounter,
                                  std::min<std::int64_t>(0, first.start), key.first, kComputeTid,
                                  static_cast<std::uint32_t>(initial_versions.size())));
    initial_versions.push_back({key.second, first.initial_version});
  }

  // Send and receive lanes, and the flow between them.
  std::vector<MessageTimes> message_times(timeline.messages.size());
  std::set<std::pair<std::int32_t, std::int32_t>> peers;  // (device, peer) pairs with lanes
  for (std::size_t i = 0; i < timeline.messages.size(); ++i) {
    const MessageSlice& message = timeline.messages[i];
    check_device(message.src_device, "message", i);
    check_device(message.dst_device, "message", i);
    MessageTimes& mt = message_times[i];
    mt.send = {to_ns(message.send_start_s, "message", i), to_ns(message.send_end_s, "message", i)};
    mt.recv = {to_ns(message.recv_start_s, "message", i), to_ns(message.recv_end_s, "message", i)};
    check_order(mt.send.start, mt.send.end, "message (send)", i);
    check_order(mt.recv.start, mt.recv.end, "message (recv)", i);
    num_pids = std::max({num_pids, message.src_device + 1, message.dst_device + 1});
    peers.emplace(message.src_device, message.dst_device);
    peers.emplace(message.dst_device, message.src_device);
    const auto index = static_cast<std::uint32_t>(i);
    const std::int32_t stid = send_tid(message.dst_device);
    const std::int32_t rtid = recv_tid(message.src_device);
    events.push_back(
        simple_event(EventKind::send, kRankSlice, mt.send.start, message.src_device, stid, index));
    events.push_back(flow_event(EventKind::flow_start, EventKind::send, message.src_device, stid,
                                index, mt.send));
    events.push_back(
        simple_event(EventKind::recv, kRankSlice, mt.recv.start, message.dst_device, rtid, index));
    events.push_back(
        flow_event(EventKind::flow_end, EventKind::recv, message.dst_device, rtid, index, mt.recv));
  }

  std::vector<Times> phase_times(timeline.phases.size());
  for (std::size_t i = 0; i < timeline.phases.size(); ++i) {
    const PhaseSlice& phase = timeline.phases[i];
    check_device(phase.device, "phase", i);
    Times& t = phase_times[i];
    t.start = to_ns(phase.start_s, "phase", i);
    t.end = to_ns(phase.end_s, "phase", i);
    check_order(t.start, t.end, "phase", i);
    num_pids = std::max(num_pids, phase.device + 1);
    events.push_back(simple_event(EventKind::phase, kRankSlice, t.start, phase.device, kComputeTid,
                                  static_cast<std::uint32_t>(i)));
  }

  for (std::size_t i = 0; i < timeline.memory.size(); ++i) {
    const MemorySample& sample = timeline.memory[i];
    check_device(sample.device, "memory sample", i);
    num_pids = std::max(num_pids, sample.device + 1);
    events.push_back(simple_event(EventKind::memory, kRankCounter,
                                  to_ns(sample.time_s, "memory sample", i), sample.device,
                                  kComputeTid, static_cast<std::uint32_t>(i)));
  }

  // Timelines arrive nearly in time order; merge sort handles that far better than introsort.
  std::stable_sort(events.begin(), events.end());

  std::string out;
  out.reserve(1024 + (events.size() + 4 * static_cast<std::size_t>(num_pids) + 4 * peers.size()) *
                         kBytesPerEventEstimate);
  Sink sink(out);
  sink.text("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
  append_metadata(sink, timeline, num_pids, peers);
  const Sources sources{timeline, compute_times, phase_times, message_times, initial_versions};
  bool first = num_pids == 0;  // otherwise the metadata wrote at least one event
  for (const Event& e : events) {
    if (!first) sink.text(",\n");
    first = false;
    append_event(sink, sources, e);
    sink.maybe_flush();
  }
  fmt::format_to(sink.it(), "\n],\"otherData\":{{\"source\":{},\"format\":\"{}\"}}}}\n",
                 json_string(timeline.source), kChromeTraceFormatTag);
  sink.flush();
  return out;
}

void write_chrome_trace(const Timeline& timeline, const std::string& path) {
  const std::string content = chrome_trace_json(timeline);
  if (path != "-") {
    write_file_atomic(path, content);
    return;
  }
  if (std::fwrite(content.data(), 1, content.size(), stdout) != content.size() ||
      std::fflush(stdout) != 0) {
    const int err = errno;
    throw std::runtime_error(
        fmt::format("cannot write to standard output: {}", std::strerror(err)));
  }
}

}  // namespace paci
