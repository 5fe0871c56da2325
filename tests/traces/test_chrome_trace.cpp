// Tests of traces/chrome_trace.hpp: the writer's top level, lanes, slices, messages, flows,
// counters, instants, metadata, µs conversion, ordering and file output; and check_trace catching
// partial overlaps, unmatched flows and the other faults it is meant to report.
#include "traces/chrome_trace.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace paci {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

Action act(ActionKind kind, std::int32_t stage, std::int32_t mb = -1) {
  return {kind, stage, mb};
}

ComputeSlice compute(ActionKind kind, std::int32_t stage, std::int32_t mb, std::int32_t device,
                     double start, double end, std::int32_t version) {
  ComputeSlice s;
  s.action = act(kind, stage, mb);
  s.device = device;
  s.start_s = start;
  s.end_s = end;
  s.version = version;
  return s;
}

MessageSlice message(Action producer, Action consumer, DependencyKind kind, std::int32_t src,
                     std::int32_t dst, std::int64_t bytes, double send_start, double send_end,
                     double recv_start, double recv_end) {
  MessageSlice m;
  m.producer = producer;
  m.consumer = consumer;
  m.kind = kind;
  m.src_device = src;
  m.dst_device = dst;
  m.bytes = bytes;
  m.send_start_s = send_start;
  m.send_end_s = send_end;
  m.recv_start_s = recv_start;
  m.recv_end_s = recv_end;
  return m;
}

// Two stages on two devices, one micro-batch: 0F0 → 1F0 (activation), 1B0 → 0B0 (gradient),
// then each stage's U. 1F0 is the known slice: [1.5 ms, 2.5015 ms].
Timeline small_timeline() {
  Timeline t;
  t.source = "simulated";
  t.num_devices = 2;
  t.compute = {
      compute(ActionKind::F, 0, 0, 0, 0.0, 1e-3, 0),
      compute(ActionKind::B, 0, 0, 0, 3.5e-3, 4.5e-3, 0),
      compute(ActionKind::U, 0, -1, 0, 4.5e-3, 5e-3, 1),
      compute(ActionKind::F, 1, 0, 1, 1.5e-3, 2.5015e-3, 0),
      compute(ActionKind::B, 1, 0, 1, 2.5015e-3, 3e-3, 0),
      compute(ActionKind::U, 1, -1, 1, 3e-3, 3.25e-3, 1),
  };
  t.messages = {
      message(act(ActionKind::F, 0, 0), act(ActionKind::F, 1, 0), DependencyKind::activation, 0, 1,
              4096, 1e-3, 1.5e-3, 1e-3, 1.5e-3),
      message(act(ActionKind::B, 1, 0), act(ActionKind::B, 0, 0), DependencyKind::gradient, 1, 0,
              8192, 3e-3, 3.5e-3, 3.25e-3, 3.5e-3),
  };
  t.memory = {{0, 0.0, 100}, {0, 1e-3, 300},   {0, 4.5e-3, 100},
              {1, 0.0, 200}, {1, 2.5e-3, 500}, {1, 3e-3, 200}};
  return t;
}

std::vector<json> events_with(const json& trace, const std::string& ph) {
  std::vector<json> out;
  for (const json& e : trace["traceEvents"])
    if (e["ph"] == ph) out.push_back(e);
  return out;
}

const json* find_event(const json& trace, const std::string& ph, const std::string& name) {
  for (const json& e : trace["traceEvents"])
    if (e["ph"] == ph && e["name"] == name) return &e;
  return nullptr;
}

std::string joined(const std::vector<std::string>& problems) {
  std::string out;
  for (const std::string& p : problems) out += p + "\n";
  return out;
}

TEST(ChromeTrace, TopLevelHasDisplayTimeUnitFirstAndOtherData) {
  const std::string text = chrome_trace_json(small_timeline());
  EXPECT_EQ(text.rfind(R"({"displayTimeUnit":"ms",)", 0), 0u) << text.substr(0, 80);
  const json trace = json::parse(text);
  EXPECT_EQ(trace["displayTimeUnit"], "ms");
  EXPECT_TRUE(trace["traceEvents"].is_array());
  EXPECT_EQ(trace["otherData"]["source"], "simulated");
  EXPECT_EQ(trace["otherData"]["format"], "paci.trace/1");
  EXPECT_EQ(trace.size(), 3u);
  EXPECT_TRUE(check_trace_text(text).empty()) << joined(check_trace_text(text));
}

TEST(ChromeTrace, ComputeSlicesAreNamedInIrTextOnTheComputeLane) {
  const Timeline timeline = small_timeline();
  const json trace = json::parse(chrome_trace_json(timeline));
  std::map<std::string, json> by_name;
  for (const json& e : events_with(trace, "X"))
    if (e["tid"] == kComputeTid) by_name[e["name"].get<std::string>()] = e;
  ASSERT_EQ(by_name.size(), timeline.compute.size());
  for (const ComputeSlice& slice : timeline.compute) {
    const std::string name = to_string(slice.action);
    ASSERT_TRUE(by_name.contains(name)) << name;
    const json& e = by_name[name];
    EXPECT_EQ(e["pid"], slice.device) << name;
    EXPECT_EQ(e["cat"], std::string(1, kind_letter(slice.action.kind))) << name;
    EXPECT_EQ(e["args"]["stage"], slice.action.stage) << name;
    EXPECT_EQ(e["args"]["version"], slice.version) << name;
    if (slice.action.kind == ActionKind::U) {
      EXPECT_FALSE(e["args"].contains("mb")) << name;
    } else {
      EXPECT_EQ(e["args"]["mb"], slice.action.microbatch) << name;
    }
  }
  EXPECT_EQ(by_name["0U"]["cat"], "U");
  EXPECT_EQ(by_name["0U"]["args"]["version"], 1);
}

// DualPipe's overlapped F&B pair: each half is its own slice, marked with its place in the pair.
TEST(ChromeTrace, OverlappedPairsAreMarked) {
  Timeline t;
  t.source = "simulated";
  t.num_devices = 1;
  t.compute = {compute(ActionKind::F, 0, 0, 0, 0.0, 1e-3, 0),
               compute(ActionKind::F, 0, 1, 0, 1e-3, 2e-3, 0),
               compute(ActionKind::B, 0, 0, 0, 2e-3, 4e-3, 0)};
  t.compute[1].action.overlap = Overlap::first;
  t.compute[2].action.overlap = Overlap::second;
  const std::string text = chrome_trace_json(t);
  EXPECT_TRUE(check_trace_text(text).empty()) << joined(check_trace_text(text));
  std::map<std::string, json> args;
  for (const json& e : events_with(json::parse(text), "X"))
    args[e["name"].get<std::string>()] = e["args"];
  ASSERT_EQ(args.size(), 3u);
  EXPECT_FALSE(args["0F0"].contains("pair"));
  EXPECT_EQ(args["0F1"]["pair"], "F&B first");
  EXPECT_EQ(args["0B0"]["pair"], "F&B second");
  EXPECT_EQ(args["0B0"]["mb"], 0);
}

TEST(ChromeTrace, MicrosecondConversionIsExact) {
  const std::string text = chrome_trace_json(small_timeline());
  // 1F0 runs from 1.5 ms to 2.5015 ms.
  EXPECT_THAT(text, HasSubstr(R"("name":"1F0","cat":"F","ph":"X","pid":1,"tid":0,"ts":1500,)"
                              R"("dur":1001.5,)"));
  const json trace = json::parse(text);
  const json* f = find_event(trace, "X", "1F0");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ((*f)["ts"].get<double>(), 1500.0);
  EXPECT_EQ((*f)["dur"].get<double>(), 1001.5);

  // Sub-µs times keep nanosecond resolution (rounded to the nearest ns).
  Timeline t;
  t.num_devices = 1;
  t.compute = {compute(ActionKind::F, 0, 0, 0, 1.2345678e-3, 2.000000001, 0)};
  const json sub_us = json::parse(chrome_trace_json(t));
  const json* g = find_event(sub_us, "X", "0F0");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ((*g)["ts"].get<double>(), 1234.568);
  EXPECT_EQ((*g)["dur"].get<double>(), 1998765.433);  // 2000000.001 - 1234.568
  EXPECT_EQ(std::llround((*g)["dur"].get<double>() * 1000), 2000000001 - 1234568);
}

TEST(ChromeTrace, MessagesOccupySendAndRecvLanes) {
  const json trace = json::parse(chrome_trace_json(small_timeline()));
  std::vector<json> sends;
  std::vector<json> recvs;
  for (const json& e : events_with(trace, "X")) {
    if (e["tid"] == kComputeTid) continue;
    (e["tid"].get<int>() % 2 == 1 ? sends : recvs).push_back(e);
  }
  ASSERT_EQ(sends.size(), 2u);
  ASSERT_EQ(recvs.size(), 2u);
  const json* act_send = nullptr;
  const json* act_recv = nullptr;
  for (const json& e : sends)
    if (e["name"] == "0F0 → 1F0") act_send = &e;
  for (const json& e : recvs)
    if (e["name"] == "0F0 → 1F0") act_recv = &e;
  ASSERT_NE(act_send, nullptr);
  ASSERT_NE(act_recv, nullptr);
  EXPECT_EQ((*act_send)["pid"], 0);
  EXPECT_EQ((*act_send)["tid"], send_tid(1));
  EXPECT_EQ((*act_send)["tid"], 3);
  EXPECT_EQ((*act_send)["cat"], "activation");
  EXPECT_EQ((*act_send)["args"]["bytes"], 4096);
  EXPECT_EQ((*act_send)["ts"].get<double>(), 1000.0);
  EXPECT_EQ((*act_send)["dur"].get<double>(), 500.0);
  EXPECT_EQ((*act_recv)["pid"], 1);
  EXPECT_EQ((*act_recv)["tid"], recv_tid(0));
  EXPECT_EQ((*act_recv)["tid"], 2);

  const json* grad_recv = nullptr;
  for (const json& e : recvs)
    if (e["name"] == "1B0 → 0B0") grad_recv = &e;
  ASSERT_NE(grad_recv, nullptr);
  EXPECT_EQ((*grad_recv)["pid"], 0);
  EXPECT_EQ((*grad_recv)["tid"], recv_tid(1));
  EXPECT_EQ((*grad_recv)["cat"], "gradient");
  EXPECT_EQ((*grad_recv)["args"]["bytes"], 8192);
  EXPECT_EQ((*grad_recv)["ts"].get<double>(), 3250.0);
  EXPECT_EQ((*grad_recv)["dur"].get<double>(), 250.0);
}

// Lanes nest and flows pair, checked here directly rather than through check_trace.
TEST(ChromeTrace, LanesNestAndEveryFlowStartHasOneEndInsideTheRightSlices) {
  const Timeline timeline = small_timeline();
  const json trace = json::parse(chrome_trace_json(timeline));

  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> lanes;
  for (const json& e : events_with(trace, "X")) {
    const double ts = e["ts"].get<double>();
    lanes[{e["pid"].get<int>(), e["tid"].get<int>()}].emplace_back(ts, ts + e["dur"].get<double>());
  }
  for (auto& [lane, slices] : lanes) {
    std::sort(slices.begin(), slices.end());
    for (std::size_t i = 1; i < slices.size(); ++i) {
      const bool after = slices[i].first >= slices[i - 1].second - 1e-9;
      const bool inside = slices[i].second <= slices[i - 1].second + 1e-9;
      EXPECT_TRUE(after || inside) << "pid " << lane.first << " tid " << lane.second;
    }
  }
  auto within = [&](int pid, int tid, double ts) {
    for (const auto& [start, end] : lanes[{pid, tid}])
      if (start <= ts && ts <= end) return true;
    return false;
  };

  const std::vector<json> starts = events_with(trace, "s");
  const std::vector<json> ends = events_with(trace, "f");
  ASSERT_EQ(starts.size(), timeline.messages.size());
  ASSERT_EQ(ends.size(), timeline.messages.size());
  std::set<json> ids;
  for (const json& s : starts) {
    EXPECT_TRUE(ids.insert(s["id"]).second) << "duplicate flow id " << s["id"];
    int matches = 0;
    for (const json& f : ends) {
      if (f["id"] != s["id"]) continue;
      ++matches;
      EXPECT_EQ(f["name"], s["name"]);
      EXPECT_EQ(f["cat"], "flow");
      EXPECT_EQ(s["cat"], "flow");
      EXPECT_EQ(f["bp"], "e");
      const int src = s["pid"].get<int>();
      const int dst = f["pid"].get<int>();
      EXPECT_EQ(s["tid"], send_tid(dst));
      EXPECT_EQ(f["tid"], recv_tid(src));
      EXPECT_TRUE(within(src, send_tid(dst), s["ts"].get<double>())) << s;
      EXPECT_TRUE(within(dst, recv_tid(src), f["ts"].get<double>())) << f;
    }
    EXPECT_EQ(matches, 1) << s;
  }
  // The right pids: the activation goes from device 0 to 1, the gradient from 1 to 0.
  for (const json& s : starts) {
    if (s["name"] == "0F0 → 1F0") {
      EXPECT_EQ(s["pid"], 0);
    }
    if (s["name"] == "1B0 → 0B0") {
      EXPECT_EQ(s["pid"], 1);
    }
  }
  EXPECT_TRUE(check_trace(trace).empty()) << joined(check_trace(trace));
}

TEST(ChromeTrace, MetadataNamesEveryProcessAndLane) {
  Timeline timeline = small_timeline();
  json trace = json::parse(chrome_trace_json(timeline));
  std::map<int, std::string> processes;
  std::map<int, int> process_sort;
  std::map<std::pair<int, int>, std::string> threads;
  std::map<std::pair<int, int>, int> thread_sort;
  for (const json& e : events_with(trace, "M")) {
    const int pid = e["pid"];
    const int tid = e["tid"];
    const json& args = e["args"];
    if (e["name"] == "process_name") processes[pid] = args["name"].get<std::string>();
    if (e["name"] == "process_sort_index") process_sort[pid] = args["sort_index"].get<int>();
    if (e["name"] == "thread_name") threads[{pid, tid}] = args["name"].get<std::string>();
    if (e["name"] == "thread_sort_index") thread_sort[{pid, tid}] = args["sort_index"].get<int>();
  }
  EXPECT_EQ(processes, (std::map<int, std::string>{{0, "device 0"}, {1, "device 1"}}));
  EXPECT_EQ(process_sort, (std::map<int, int>{{0, 0}, {1, 1}}));
  EXPECT_EQ(threads, (std::map<std::pair<int, int>, std::string>{{{0, 0}, "compute"},
                                                                 {{0, 3}, "send → dev 1"},
                                                                 {{0, 4}, "recv ← dev 1"},
                                                                 {{1, 0}, "compute"},
                                                                 {{1, 1}, "send → dev 0"},
                                                                 {{1, 2}, "recv ← dev 0"}}));
  for (const auto& [lane, sort] : thread_sort) EXPECT_EQ(sort, lane.second);
  EXPECT_EQ(thread_sort.size(), threads.size());

  timeline.device_names = {"gpu:0 \"a\"", ""};
  trace = json::parse(chrome_trace_json(timeline));
  const json* first = find_event(trace, "M", "process_name");
  ASSERT_NE(first, nullptr);
  EXPECT_EQ((*first)["args"]["name"], "gpu:0 \"a\"");
  int named_default = 0;
  for (const json& e : events_with(trace, "M"))
    if (e["name"] == "process_name" && e["args"]["name"] == "device 1") ++named_default;
  EXPECT_EQ(named_default, 1);
}

TEST(ChromeTrace, NamesAndSourceAreEscapedEvenWhenNotUtf8) {
  Timeline timeline = small_timeline();
  timeline.source = "measured\n\"run\" \xff";
  timeline.device_names = {"a\\b", "\xfe"};
  const std::string text = chrome_trace_json(timeline);
  const json trace = json::parse(text);  // throws if anything was left unescaped
  EXPECT_EQ(trace["otherData"]["source"], "measured\n\"run\" \xef\xbf\xbd");
  const json* first = find_event(trace, "M", "process_name");
  ASSERT_NE(first, nullptr);
  EXPECT_EQ((*first)["args"]["name"], "a\\b");
}

TEST(ChromeTrace, CountersForMemoryAndWeightVersions) {
  const json trace = json::parse(chrome_trace_json(small_timeline()));
  std::map<int, std::vector<std::pair<double, long>>> memory;
  std::map<std::string, std::vector<std::pair<double, int>>> versions;
  for (const json& e : events_with(trace, "C")) {
    if (e["name"] == "memory")
      memory[e["pid"].get<int>()].emplace_back(e["ts"].get<double>(),
                                               e["args"]["bytes"].get<long>());
    else
      versions[e["name"].get<std::string>() + " @" + std::to_string(e["pid"].get<int>())]
          .emplace_back(e["ts"].get<double>(), e["args"]["version"].get<int>());
  }
  EXPECT_EQ(memory[0], (std::vector<std::pair<double, long>>{{0, 100}, {1000, 300}, {4500, 100}}));
  EXPECT_EQ(memory[1], (std::vector<std::pair<double, long>>{{0, 200}, {2500, 500}, {3000, 200}}));
  EXPECT_EQ(versions.size(), 2u);
  EXPECT_EQ(versions["weight version stage 0 @0"],
            (std::vector<std::pair<double, int>>{{0, 0}, {5000, 1}}));
  EXPECT_EQ(versions["weight version stage 1 @1"],
            (std::vector<std::pair<double, int>>{{0, 0}, {3250, 1}}));
}

TEST(ChromeTrace, InstantsMarkEachUpdate) {
  const json trace = json::parse(chrome_trace_json(small_timeline()));
  const std::vector<json> instants = events_with(trace, "i");
  ASSERT_EQ(instants.size(), 2u);
  const json* u0 = find_event(trace, "i", "update stage 0 → v1");
  const json* u1 = find_event(trace, "i", "update stage 1 → v1");
  ASSERT_NE(u0, nullptr);
  ASSERT_NE(u1, nullptr);
  EXPECT_EQ((*u0)["s"], "t");
  EXPECT_EQ((*u0)["pid"], 0);
  EXPECT_EQ((*u0)["tid"], kComputeTid);
  EXPECT_EQ((*u0)["ts"].get<double>(), 5000.0);
  EXPECT_EQ((*u1)["pid"], 1);
  EXPECT_EQ((*u1)["ts"].get<double>(), 3250.0);
}

TEST(ChromeTrace, MetadataFirstThenSortedByTimeAndDeterministic) {
  const Timeline timeline = small_timeline();
  const std::string text = chrome_trace_json(timeline);
  EXPECT_EQ(text, chrome_trace_json(timeline));
  const json trace = json::parse(text);
  bool metadata = true;
  double previous = -1.0;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == "M") {
      EXPECT_TRUE(metadata) << "metadata after other events: " << e;
      continue;
    }
    metadata = false;
    EXPECT_GE(e["ts"].get<double>(), previous) << e;
    previous = e["ts"].get<double>();
  }
  // One event per line, so traces diff and grep well.
  EXPECT_THAT(text, HasSubstr("\n{\"name\":\"0F0\""));
}

TEST(ChromeTrace, ZeroDurationMessagesKeepTheirSlicesAndFlow) {
  Timeline timeline = small_timeline();
  for (MessageSlice& m : timeline.messages) {
    m.send_end_s = m.send_start_s;
    m.recv_start_s = m.send_start_s;
    m.recv_end_s = m.send_start_s;
  }
  const std::string text = chrome_trace_json(timeline);
  const json trace = json::parse(text);
  EXPECT_TRUE(check_trace(trace).empty()) << joined(check_trace(trace));
  EXPECT_EQ(events_with(trace, "s").size(), 2u);
  EXPECT_EQ(events_with(trace, "f").size(), 2u);
  // Each flow event comes right after the zero-length slice it binds to.
  const json& events = trace["traceEvents"];
  for (std::size_t i = 0; i < events.size(); ++i) {
    if (events[i]["ph"] != "s" && events[i]["ph"] != "f") continue;
    ASSERT_GT(i, 0u);
    const json& slice = events[i - 1];
    EXPECT_EQ(slice["ph"], "X");
    EXPECT_EQ(slice["name"], events[i]["name"]);
    EXPECT_EQ(slice["pid"], events[i]["pid"]);
    EXPECT_EQ(slice["tid"], events[i]["tid"]);
    EXPECT_EQ(slice["dur"].get<double>(), 0.0);
    EXPECT_EQ(slice["ts"], events[i]["ts"]);
  }
}

TEST(ChromeTrace, EmptyTimelineIsAValidTrace) {
  Timeline timeline;
  timeline.source = "measured";
  const std::string text = chrome_trace_json(timeline);
  const json trace = json::parse(text);
  EXPECT_TRUE(trace["traceEvents"].empty());
  EXPECT_TRUE(check_trace_text(text).empty()) << joined(check_trace_text(text));

  timeline.num_devices = 3;  // devices without events still get a process and a compute lane
  const json three = json::parse(chrome_trace_json(timeline));
  EXPECT_EQ(events_with(three, "M").size(), 12u);
}

TEST(ChromeTrace, RejectsImpossibleTimes) {
  Timeline timeline = small_timeline();
  timeline.compute[1].end_s = timeline.compute[1].start_s - 1e-3;
  EXPECT_THROW(chrome_trace_json(timeline), std::invalid_argument);
  timeline = small_timeline();
  timeline.messages[0].recv_end_s = std::nan("");
  EXPECT_THROW(chrome_trace_json(timeline), std::invalid_argument);
  timeline = small_timeline();
  timeline.memory[0].device = -1;
  EXPECT_THROW(chrome_trace_json(timeline), std::invalid_argument);
}

TEST(ChromeTrace, WritesFilesAtomicallyAndStdout) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("paci_chrome_trace_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path path = dir / "trace.json";
  const Timeline timeline = small_timeline();
  write_chrome_trace(timeline, path.string());
  std::ifstream in(path, std::ios::binary);
  std::ostringstream content;
  content << in.rdbuf();
  EXPECT_EQ(content.str(), chrome_trace_json(timeline));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
  fs::remove_all(dir);

  testing::internal::CaptureStdout();
  write_chrome_trace(timeline, "-");
  EXPECT_EQ(testing::internal::GetCapturedStdout(), chrome_trace_json(timeline));
}

// ---- check_trace -------------------------------------------------------------------------------

TEST(ChromeTraceCheck, ReportsPartiallyOverlappingSlicesOfATimeline) {
  Timeline timeline = small_timeline();
  // 0F1 starts while 0F0 runs and ends after it: the compute lane of device 0 no longer nests.
  timeline.compute.push_back(compute(ActionKind::F, 0, 1, 0, 0.5e-3, 1.5e-3, 0));
  const std::vector<std::string> problems = check_trace(json::parse(chrome_trace_json(timeline)));
  ASSERT_EQ(problems.size(), 1u) << joined(problems);
  EXPECT_THAT(problems[0], HasSubstr("pid 0 tid 0"));
  EXPECT_THAT(problems[0], HasSubstr("\"0F1\""));
  EXPECT_THAT(problems[0], HasSubstr("partially overlaps \"0F0\""));
}

TEST(ChromeTraceCheck, AcceptsSlicesThatNestOrTouch) {
  const json trace = json::parse(R"({"displayTimeUnit":"ms","traceEvents":[
    {"name":"process_name","ph":"M","pid":0,"tid":0,"args":{"name":"device 0"}},
    {"name":"thread_name","ph":"M","pid":0,"tid":0,"args":{"name":"compute"}},
    {"name":"outer","ph":"X","pid":0,"tid":0,"ts":0,"dur":10},
    {"name":"inner","ph":"X","pid":0,"tid":0,"ts":0,"dur":10},
    {"name":"inner2","ph":"X","pid":0,"tid":0,"ts":2,"dur":3},
    {"name":"zero","ph":"X","pid":0,"tid":0,"ts":10,"dur":0},
    {"name":"next","ph":"X","pid":0,"tid":0,"ts":10,"dur":0.1},
    {"name":"after","ph":"X","pid":0,"tid":0,"ts":10.1,"dur":0.2}
  ],"otherData":{"format":"paci.trace/1"}})");
  EXPECT_TRUE(check_trace(trace).empty()) << joined(check_trace(trace));
}

TEST(ChromeTraceCheck, ReportsAMadeUpBrokenTrace) {
  const std::string text = R"({"traceEvents":[
    {"name":"process_name","ph":"M","pid":0,"tid":0,"args":{"name":"device 0"}},
    {"name":"thread_name","ph":"M","pid":0,"tid":0,"args":{"name":"compute"}},
    {"name":"thread_name","ph":"M","pid":0,"tid":3,"args":{"name":"send → dev 1"}},
    {"name":"a","ph":"X","pid":0,"tid":0,"ts":0,"dur":10},
    {"name":"b","ph":"X","pid":0,"tid":0,"ts":5,"dur":10},
    {"name":"m","ph":"X","pid":0,"tid":3,"ts":5,"dur":1},
    {"name":"m","cat":"flow","ph":"s","id":1,"pid":0,"tid":3,"ts":5.5},
    {"name":"lost","cat":"flow","ph":"s","id":2,"pid":0,"tid":3,"ts":20},
    {"name":"x","cat":"flow","ph":"f","id":3,"pid":1,"tid":2,"ts":21},
    {"name":"late","ph":"M","pid":0,"tid":0,"args":{}},
    {"name":"c","ph":"X","pid":1,"tid":0,"ts":1,"dur":1},
    {"name":"memory","ph":"C","pid":0,"tid":0,"ts":30,"args":{"bytes":"many"}},
    {"name":"u","ph":"i","pid":0,"tid":0,"ts":31}
  ],"displayTimeUnit":"ms","otherData":{"format":"paci.trace/1"}})";
  const std::vector<std::string> problems = check_trace_text(text);
  const std::string all = joined(problems);
  EXPECT_THAT(all, HasSubstr("first key of the trace object is not \"displayTimeUnit\""));
  EXPECT_THAT(all, HasSubstr("\"b\" [5000, 15000] ns partially overlaps \"a\" [0, 10000] ns"));
  EXPECT_THAT(all, HasSubstr("flow id 1: 1 \"s\" and 0 \"f\""));
  EXPECT_THAT(all, HasSubstr("flow id 2: 1 \"s\" and 0 \"f\""));
  EXPECT_THAT(all, HasSubstr("flow id 3: 0 \"s\" and 1 \"f\""));
  EXPECT_THAT(all, HasSubstr("flow end without \"bp\":\"e\""));
  EXPECT_THAT(all, HasSubstr("metadata \"late\" after other events"));
  EXPECT_THAT(all, HasSubstr("ts 1000 ns before the previous event's 21000 ns"));
  EXPECT_THAT(all, HasSubstr("pid 1 has no process_name"));
  EXPECT_THAT(all, HasSubstr("pid 1 tid 0 has no thread_name"));
  EXPECT_THAT(all, HasSubstr("counter without numeric args"));
  EXPECT_THAT(all, HasSubstr("instant without scope"));
}

TEST(ChromeTraceCheck, ReportsFlowsOutsideSlicesOrOffTheLaneScheme) {
  const json trace = json::parse(R"({"displayTimeUnit":"ms","traceEvents":[
    {"name":"process_name","ph":"M","pid":0,"tid":0,"args":{"name":"device 0"}},
    {"name":"process_name","ph":"M","pid":1,"tid":0,"args":{"name":"device 1"}},
    {"name":"thread_name","ph":"M","pid":0,"tid":3,"args":{"name":"send → dev 1"}},
    {"name":"thread_name","ph":"M","pid":1,"tid":2,"args":{"name":"recv ← dev 0"}},
    {"name":"thread_name","ph":"M","pid":1,"tid":4,"args":{"name":"recv ← dev 1"}},
    {"name":"m","ph":"X","pid":0,"tid":3,"ts":0,"dur":1},
    {"name":"m","ph":"X","pid":1,"tid":2,"ts":0,"dur":1},
    {"name":"m","cat":"flow","ph":"s","id":1,"pid":0,"tid":3,"ts":0.5},
    {"name":"m","cat":"flow","ph":"f","bp":"e","id":1,"pid":1,"tid":2,"ts":0.5},
    {"name":"n","cat":"flow","ph":"s","id":2,"pid":0,"tid":3,"ts":2},
    {"name":"n2","cat":"flow","ph":"f","bp":"e","id":2,"pid":1,"tid":4,"ts":2}
  ],"otherData":{"format":"paci.trace/1"}})");
  const std::string all = joined(check_trace(trace));
  EXPECT_THAT(all, Not(HasSubstr("flow id 1")));
  EXPECT_THAT(all, HasSubstr("flow id 2: \"s\" is \"n\" (flow) but \"f\" is \"n2\" (flow)"));
  EXPECT_THAT(all, HasSubstr("flow id 2 (\"n\"): \"s\" at 2000 ns is inside no slice"));
  EXPECT_THAT(all, HasSubstr("flow id 2 (\"n2\"): \"f\" at 2000 ns is inside no slice"));
  EXPECT_THAT(all, HasSubstr("expected the send lane tid 3 and the recv lane tid 2"));
}

}  // namespace
}  // namespace paci
