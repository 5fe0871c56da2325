// Replay (sim/replay.hpp, traces/report_timeline.hpp): a timeline made with arbitrary per-action
// durations, waits and send work replays to itself exactly; a difference is found and explained;
// a timeline that does not belong to the schedule is refused with the entry named; the report's
// timeline key round-trips.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "schedules/analysis.hpp"
#include "schedules/generators.hpp"
#include "sim/engine.hpp"
#include "sim/replay.hpp"
#include "traces/metrics.hpp"
#include "traces/report_timeline.hpp"

namespace paci {
namespace {

// A "measured" run: the engine in replay mode with made-up durations (varying per action), waits
// before actions and send work after them, and message delays — so every kind of input a replay
// reads is exercised, and the times are consistent as a real run's are.
MeasuredTimeline made_up_run(const Schedule& s) {
  ReplayInputs in;
  in.actions.resize(s.devices.size());
  for (std::size_t d = 0; d < s.devices.size(); ++d)
    for (std::size_t i = 0; i < s.devices[d].size(); ++i)
      in.actions[d].push_back({1.0 + 0.1 * static_cast<double>((3 * i + d) % 7),
                               0.01 * static_cast<double>(i % 3), 0.02 * static_cast<double>(d)});
  std::size_t vertices = 0;
  for (const auto& list : s.devices) vertices += list.size();
  in.message_delay_s.assign(vertices, 0.0);
  for (std::size_t v = 0; v < vertices; ++v)
    in.message_delay_s[v] = 0.05 * static_cast<double>(v % 4);
  SimOptions o;
  o.replay = &in;
  // As the executors run it: an overlapped pair's two actions one after the other, each waiting
  // for its own inputs only.
  Schedule apart = s;
  for (auto& list : apart.devices)
    for (Action& a : list) a.overlap = Overlap::none;
  const SimResult r = simulate(apart, uniform_cost_model(s.stages, {}), o);
  return {r.times, r.timeline.messages};
}

TEST(Replay, AMeasuredTimelineReplaysToItself) {
  for (const char* kind : {"gpipe", "1f1b", "pipedream", "2bw", "paci", "dualpipev"})
    for (std::int32_t P : {2, 4}) {
      SCOPED_TRACE(std::string(kind) + " P=" + std::to_string(P));
      // DualPipeV: 2P stages (the cost model's), M >= 2P; its pairs ran back to back.
      const bool v = std::string(kind) == "dualpipev";
      const Schedule s = generate_schedule(kind, P, v ? 2 * P : P, 3);
      const MeasuredTimeline measured = made_up_run(s);
      const ReplayInputs inputs = replay_inputs(s, measured, "run");
      SimOptions o;
      o.replay = &inputs;
      const SimResult replayed = simulate(s, uniform_cost_model(s.stages, {}), o);
      const ReplayComparison c = compare_replay(s, measured, inputs, replayed.times, 1e-9);
      EXPECT_EQ(c.off, 0);
      EXPECT_LT(c.max_start_error_s, 1e-9);
      EXPECT_NEAR(c.replayed_makespan_s, c.measured_makespan_s, 1e-9);
      EXPECT_NEAR(c.replayed_bubble, c.measured_bubble, 1e-12);
      EXPECT_EQ(c.actions, static_cast<std::int64_t>(s.num_actions()));
    }
}

// Host sharing stretches actions unevenly; its timeline replays exactly too (the replay ignores
// the hosts: the durations already hold the slowdown).
TEST(Replay, ASharedHostRunReplaysToItself) {
  const Schedule s = generate_schedule("paci", 4, 4, 3);
  UniformCosts u;
  u.latency_s = 0.03;
  CostModel costs = uniform_cost_model(4, u);
  HostSharing host;
  host.devices = {0, 1, 2, 3};
  host.slowdown_by_count = {1.0, 1.4, 2.1, 2.9};
  costs.hosts = {host};
  const SimResult run = simulate(s, costs, {true});
  const MeasuredTimeline measured{run.times, run.timeline.messages};
  const ReplayInputs inputs = replay_inputs(s, measured, "run");
  SimOptions o;
  o.replay = &inputs;
  const SimResult replayed = simulate(s, costs, o);
  const ReplayComparison c = compare_replay(s, measured, inputs, replayed.times, 1e-9);
  EXPECT_EQ(c.off, 0);
  EXPECT_LT(c.max_start_error_s, 1e-9);
}

TEST(Replay, ADifferenceIsFoundAndExplained) {
  const Schedule s = generate_schedule("1f1b", 2, 2, 1);
  const MeasuredTimeline measured = made_up_run(s);
  const ReplayInputs inputs = replay_inputs(s, measured, "run");
  ActionTimes replayed = measured.times;
  // 1F1 (device 1, third action) starting a second late, as a wrong dependency would make it.
  ASSERT_EQ(to_string(s.devices[1][2]), "1F1");
  replayed[1][2].start_s += 1.0;
  const ReplayComparison c = compare_replay(s, measured, inputs, replayed, 0.01);
  EXPECT_EQ(c.off, 1);
  EXPECT_NEAR(c.max_start_error_s, 1.0, 1e-12);
  EXPECT_EQ(to_string(c.worst_action), "1F1");
  ASSERT_EQ(c.largest.size(), 1u);
  EXPECT_EQ(c.largest[0].device, 1);
  EXPECT_NE(c.largest[0].why.find("measured: waited for"), std::string::npos) << c.largest[0].why;
  EXPECT_NE(c.largest[0].why.find("replayed: waited for"), std::string::npos) << c.largest[0].why;
}

TEST(Replay, RefusesMessagesTheScheduleDoesNotExplain) {
  const Schedule s = generate_schedule("1f1b", 2, 2, 1);
  MeasuredTimeline missing = made_up_run(s);
  ASSERT_FALSE(missing.messages.empty());
  const MessageSlice dropped = missing.messages.front();
  missing.messages.erase(missing.messages.begin());
  try {
    replay_inputs(s, missing, "r.json");
    ADD_FAILURE() << "a missing message was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("r.json: the timeline has no message " +
                                         to_string(dropped.producer) + " -> " +
                                         to_string(dropped.consumer)),
              std::string::npos)
        << e.what();
  }
  MeasuredTimeline extra = made_up_run(s);
  MessageSlice bogus = extra.messages.front();
  bogus.producer = Action{ActionKind::F, 0, 1};
  bogus.consumer = Action{ActionKind::B, 1, 1};  // 1B1 waits for 1F1, on its own device
  extra.messages.push_back(bogus);
  try {
    replay_inputs(s, extra, "r.json");
    ADD_FAILURE() << "a message the dependencies do not explain was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("0F1 -> 1B1, which the schedule's dependencies do not"),
              std::string::npos)
        << e.what();
  }
}

TEST(ReportTimeline, RoundTripsAndRefusesAnotherSchedule) {
  const Schedule s = generate_schedule("paci", 2, 2, 2);
  const MeasuredTimeline run = made_up_run(s);
  const ordered_json head{{"source", "measured"},
                          {"schedule", schedule_summary_json(s)},
                          {"timeline", timeline_json(run.times, run.messages)}};
  nlohmann::json report = nlohmann::json::parse(report_with_versions(head, analyze(s).versions));
  const MeasuredTimeline back = read_measured_timeline(report, s, "r.json");
  ASSERT_EQ(back.times.size(), run.times.size());
  for (std::size_t d = 0; d < run.times.size(); ++d)
    for (std::size_t i = 0; i < run.times[d].size(); ++i) {
      EXPECT_EQ(back.times[d][i].start_s, run.times[d][i].start_s);
      EXPECT_EQ(back.times[d][i].end_s, run.times[d][i].end_s);
      EXPECT_EQ(back.times[d][i].device_free_s(), run.times[d][i].device_free_s());
    }
  ASSERT_EQ(back.messages.size(), run.messages.size());
  for (std::size_t k = 0; k < run.messages.size(); ++k) {
    EXPECT_EQ(back.messages[k].producer, run.messages[k].producer);
    EXPECT_EQ(back.messages[k].consumer, run.messages[k].consumer);
    EXPECT_EQ(back.messages[k].kind, run.messages[k].kind);
    EXPECT_EQ(back.messages[k].send_end_s, run.messages[k].send_end_s);
  }
  auto refused = [&](nlohmann::json r, const Schedule& sched, const std::string& fragment) {
    try {
      read_measured_timeline(r, sched, "r.json");
      ADD_FAILURE() << "accepted: " << fragment;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).rfind("r.json: ", 0), 0u) << e.what();
    }
  };
  refused(report, generate_schedule("1f1b", 2, 2, 2), "its kind is \"paci\"");
  refused(report, generate_schedule("paci", 2, 2, 3), "its steps is 2");
  // The same counts in another order: device 0 steps before its last backward of step 0.
  Schedule reordered = s;
  auto& list = reordered.devices[0];
  const auto u = std::find(list.begin(), list.end(), Action{ActionKind::U, 0, -1});
  ASSERT_NE(u, list.begin());
  std::iter_swap(u, u - 1);
  refused(report, reordered, "the report is a run of another schedule: versions[");
  nlohmann::json simulated = report;
  simulated["source"] = "simulated";
  refused(simulated, s, "only a measured run can be replayed");
  nlohmann::json old = report;
  old.erase("timeline");
  refused(old, s, "has no 'timeline'");
  nlohmann::json short_list = report;
  short_list["timeline"]["actions"][1].erase(0);
  refused(short_list, s, "timeline.actions[1] has");
  nlohmann::json backwards = report;
  backwards["timeline"]["actions"][0][1][1] = -1.0;
  refused(backwards, s, "timeline.actions[0][1] (");
  nlohmann::json wrong_device = report;
  wrong_device["timeline"]["messages"][0][3] = 0;
  refused(wrong_device, s, "runs on device 1, not 0");
  nlohmann::json not_action = report;
  not_action["timeline"]["messages"][0][0] = "0X1";
  refused(not_action, s, "timeline.messages[0].producer");
  // Found by the fuzzer (tests/fuzz/regressions/report): a version field of 2.2e118 was converted
  // to int (undefined behaviour), and a string one escaped as nlohmann's type_error.
  for (const nlohmann::json& odd : {nlohmann::json(2.2e118), nlohmann::json("0"),
                                    nlohmann::json(0.0), nlohmann::json(nullptr)}) {
    nlohmann::json bad = report;
    bad["versions"][0]["v_f"] = odd;
    refused(bad, s, "versions[0] is");
  }
}

}  // namespace
}  // namespace paci
