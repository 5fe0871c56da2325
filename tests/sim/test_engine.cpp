// The simulator against closed forms and hand computations: flushed bubbles, PACI's steady state
// and speed-up limit, staleness equal to the static analysis, memory, link timing, traces.
#include <gtest/gtest.h>

#include <cmath>
#include <utility>
#include <vector>

#include "schedules/analysis.hpp"
#include "schedules/generators.hpp"
#include "schedules/ir.hpp"
#include "sim/engine.hpp"
#include "traces/chrome_trace.hpp"

namespace paci {
namespace {

CostModel uniform(std::int32_t P, double tf, double tb, double tu = 0.0) {
  UniformCosts u;
  u.tf = tf;
  u.tb = tb;
  u.tu = tu;
  return uniform_cost_model(P, u);
}

TEST(Simulator, FlushedBubbleIsClosedForm) {
  for (const char* kind : {"gpipe", "1f1b"})
    for (std::int32_t P = 1; P <= 12; ++P)
      for (std::int32_t M = 1; M <= 16; ++M)
        for (std::int32_t N : {1, 3})
          for (double tb : {1.0, 2.0, 3.5}) {
            const Schedule s = generate_schedule(kind, P, M, N);
            const SimResult r = simulate(s, uniform(P, 1.0, tb), {false});
            const TimingMetrics t = timing_metrics(s, r.times);
            const double expected = static_cast<double>(P - 1) / (M + P - 1);
            EXPECT_NEAR(t.bubble_ratio, expected, 1e-9)
                << kind << " P=" << P << " M=" << M << " N=" << N << " tb=" << tb;
            EXPECT_NEAR(t.makespan_s, N * (M + P - 1) * (1.0 + tb), 1e-9);
            if (N >= 3) {
              EXPECT_NEAR(t.steady_bubble_ratio, expected, 1e-9) << kind << " P=" << P;
            }
          }
}

TEST(Simulator, AsyncSchedulesHaveNoSteadyBubble) {
  for (const char* kind : {"paci", "pipedream", "2bw"})
    for (std::int32_t P = 2; P <= 8; ++P)
      for (std::int32_t M : {P / 2, P - 1, P, 2 * P}) {
        if (M < 1 || (std::string(kind) == "2bw" && M < P)) continue;
        const Schedule s = generate_schedule(kind, P, M, 64);
        const SimResult r = simulate(s, uniform(P, 1.0, 2.0), {false});
        const TimingMetrics t = timing_metrics(s, r.times);
        ASSERT_TRUE(std::isfinite(t.steady_bubble_ratio)) << kind << " P=" << P << " M=" << M;
        EXPECT_NEAR(t.steady_bubble_ratio, 0.0, 1e-12) << kind << " P=" << P << " M=" << M;
        // Only fill and drain are idle: (P-1)(tf+tb) per device at each end.
        EXPECT_NEAR(t.makespan_s, (s.total_microbatches() + P - 1) * 3.0, 1e-9);
      }
}

TEST(Simulator, PaciSpeedupOverOneFOneBTendsToTheLimit) {
  for (std::int32_t P : {4, 8})
    for (std::int32_t M : {4, 8, 16}) {
      const double limit = static_cast<double>(M + P - 1) / M;
      double previous = 0.0;
      for (std::int32_t N : {2, 8, 32, 256}) {
        const double flush =
            timing_metrics(
                generate_schedule("1f1b", P, M, N),
                simulate(generate_schedule("1f1b", P, M, N), uniform(P, 1, 2), {false}).times)
                .makespan_s;
        const Schedule paci = generate_schedule("paci", P, M, N);
        const double async =
            timing_metrics(paci, simulate(paci, uniform(P, 1, 2), {false}).times).makespan_s;
        const double speedup = flush / async;
        EXPECT_GT(speedup, previous) << "P=" << P << " M=" << M << " N=" << N;
        EXPECT_LT(speedup, limit);
        previous = speedup;
      }
      EXPECT_NEAR(previous, limit, 0.01 * limit) << "P=" << P << " M=" << M;
    }
}

TEST(Simulator, StalenessEqualsStaticAnalysis) {
  UniformCosts u;
  u.tf = 1.0;
  u.tb = 2.7;
  u.tu = 0.3;
  u.latency_s = 0.4;
  u.bandwidth_bytes_per_s = 1000.0;
  u.message_bytes = 700;
  for (const auto& kind : generator_kinds())
    for (std::int32_t P : {1, 2, 3, 5, 8})
      for (std::int32_t M : {1, 2, 3, 8, 9}) {
        if ((kind == "2bw" && M < P) || (kind == "interleaved" && M % P != 0) ||
            (kind == "dualpipev" && M < 2 * P) ||
            (kind == "dualpipe" && (P % 2 != 0 || M % 2 != 0 || M < 2 * P)))
          continue;
        const Schedule s = generate_schedule(kind, P, M, 3);
        const Analysis expected = analyze(s);
        const SimResult r = simulate(s, uniform_cost_model(s.stages, u), {false});
        ASSERT_EQ(r.observed.versions.size(), expected.versions.size());
        for (std::size_t i = 0; i < expected.versions.size(); ++i) {
          EXPECT_EQ(r.observed.versions[i].v_f, expected.versions[i].v_f) << kind << " " << i;
          EXPECT_EQ(r.observed.versions[i].v_b, expected.versions[i].v_b) << kind << " " << i;
          EXPECT_EQ(r.observed.versions[i].update, expected.versions[i].update);
        }
        for (std::int32_t st = 0; st < P; ++st) {
          const auto& a = r.observed.stages[static_cast<std::size_t>(st)];
          const auto& b = expected.stages[static_cast<std::size_t>(st)];
          EXPECT_EQ(a.max_staleness, b.max_staleness) << kind;
          EXPECT_DOUBLE_EQ(a.mean_staleness, b.mean_staleness) << kind;
          EXPECT_EQ(a.peak_activations, b.peak_activations) << kind;
          EXPECT_EQ(a.peak_weight_versions, b.peak_weight_versions) << kind;
        }
      }
}

TEST(Simulator, PeakMemoryIsStaticPlusPeakActivations) {
  UniformCosts u;
  u.activation_bytes = 3'000'000;
  u.weight_bytes = 50'000'000;
  for (const char* kind : {"gpipe", "1f1b", "paci"})
    for (std::int32_t P : {1, 2, 4, 7})
      for (std::int32_t M : {1, 3, 8}) {
        const Schedule s = generate_schedule(kind, P, M, 3);
        const Analysis a = analyze(s);
        const CostModel costs = uniform_cost_model(P, u);
        const SimResult r = simulate(s, costs, {true});
        for (std::int32_t st = 0; st < P; ++st) {
          const auto d = static_cast<std::size_t>(st);
          EXPECT_EQ(
              r.device_peak_memory_bytes[d],
              costs.stages[d].static_bytes() + u.activation_bytes * a.stages[d].peak_activations)
              << kind << " P=" << P << " M=" << M << " stage " << st;
        }
      }
  // Stash policies also hold old weight versions: the peak lies between the larger of the two
  // peaks and their sum.
  const Schedule s = generate_schedule("pipedream", 4, 2, 4);
  const Analysis a = analyze(s);
  const CostModel costs = uniform_cost_model(4, u);
  const SimResult r = simulate(s, costs, {true});
  for (std::size_t st = 0; st < 4; ++st) {
    const std::int64_t acts = u.activation_bytes * a.stages[st].peak_activations;
    const std::int64_t weights = u.weight_bytes * (a.stages[st].peak_weight_versions - 1);
    EXPECT_GE(r.device_peak_memory_bytes[st],
              costs.stages[st].static_bytes() + std::max(acts, weights));
    EXPECT_LE(r.device_peak_memory_bytes[st], costs.stages[st].static_bytes() + acts + weights);
  }
  EXPECT_EQ(r.device_peak_memory_bytes[0],
            costs.stages[0].static_bytes() + 4 * u.activation_bytes + 3 * u.weight_bytes);
}

// Two stages' costs with links slow enough that a second message queues behind the first.
CostModel slow_link_costs() {
  UniformCosts u;
  u.tf = 1.0;
  u.tb = 2.0;
  u.tu = 0.5;
  u.latency_s = 0.25;
  u.bandwidth_bytes_per_s = 100.0;
  u.message_bytes = 150;  // 1.5 s on the wire
  return uniform_cost_model(2, u);
}

// Each device's actions ran over exactly these [start, end] spans, in list order.
void expect_spans(const Schedule& s, const SimResult& r,
                  const std::vector<std::vector<std::pair<double, double>>>& spans) {
  ASSERT_EQ(r.times.size(), spans.size());
  for (std::size_t d = 0; d < spans.size(); ++d) {
    ASSERT_EQ(r.times[d].size(), spans[d].size());
    for (std::size_t i = 0; i < spans[d].size(); ++i) {
      EXPECT_DOUBLE_EQ(r.times[d][i].start_s, spans[d][i].first) << to_string(s.devices[d][i]);
      EXPECT_DOUBLE_EQ(r.times[d][i].end_s, spans[d][i].second) << to_string(s.devices[d][i]);
    }
  }
}

// Two stages, two micro-batches, 1F1B on those links. Worked by hand in the comments.
TEST(Simulator, HandComputedTwoStageMakespan) {
  Schedule s = generate_schedule("1f1b", 2, 2, 1);
  const SimResult r = simulate(s, slow_link_costs(), {true});
  // dev0: 0F0 [0,1] 0F1 [1,2]; act0 on the wire [1,2.5] arrives 2.75; act1 waits for the link:
  //       [2.5,4] arrives 4.25
  // dev1: 1F0 [2.75,3.75] 1B0 [3.75,5.75] 1F1 [5.75,6.75] 1B1 [6.75,8.75] 1U [8.75,9.25];
  //       grad0 [5.75,7.25] arrives 7.5; grad1 [8.75,10.25] arrives 10.5
  // dev0: 0B0 [7.5,9.5] 0B1 [10.5,12.5] 0U [12.5,13]
  ASSERT_EQ(to_string(s.devices[0][2]), "0B0");
  expect_spans(s, r,
               {{{0, 1}, {1, 2}, {7.5, 9.5}, {10.5, 12.5}, {12.5, 13}},
                {{2.75, 3.75}, {3.75, 5.75}, {5.75, 6.75}, {6.75, 8.75}, {8.75, 9.25}}});
  EXPECT_DOUBLE_EQ(timing_metrics(s, r.times).makespan_s, 13.0);
  ASSERT_EQ(r.timeline.messages.size(), 4u);
  const MessageSlice* act1 = nullptr;
  for (const auto& m : r.timeline.messages)
    if (m.producer == Action{ActionKind::F, 0, 1}) act1 = &m;
  ASSERT_NE(act1, nullptr);
  EXPECT_DOUBLE_EQ(act1->send_start_s, 2.5);
  EXPECT_DOUBLE_EQ(act1->recv_end_s, 4.25);
  EXPECT_EQ(act1->bytes, 150);
  // The critical path ends at 0U and includes the waits for both gradients.
  EXPECT_DOUBLE_EQ(r.critical_path.length_s, 13.0);
  EXPECT_EQ(to_string(r.critical_path.actions.back()), "0U");
  EXPECT_EQ(to_string(r.critical_path.actions.front()), "0F0");
}

// The same run with blocking sends (Megatron-LM without P2P overlap): a device is free for its
// next action only when the message it sent has arrived.
TEST(Simulator, BlockingSendsHoldTheSenderUntilArrival) {
  Schedule s = generate_schedule("1f1b", 2, 2, 1);
  CostModel costs = slow_link_costs();
  costs.blocking_sends = true;
  const SimResult r = simulate(s, costs, {true});
  // dev0: 0F0 [0,1], act0 [1,2.5] arrives 2.75, free then; 0F1 [2.75,3.75], act1 [3.75,5.25]
  //       arrives 5.5
  // dev1: 1F0 [2.75,3.75] 1B0 [3.75,5.75], grad0 [5.75,7.25] arrives 7.5, free then;
  //       1F1 [7.5,8.5] 1B1 [8.5,10.5], grad1 [10.5,12] arrives 12.25; 1U [12.25,12.75]
  // dev0: 0B0 [7.5,9.5] 0B1 [12.25,14.25] 0U [14.25,14.75]
  expect_spans(s, r,
               {{{0, 1}, {2.75, 3.75}, {7.5, 9.5}, {12.25, 14.25}, {14.25, 14.75}},
                {{2.75, 3.75}, {3.75, 5.75}, {7.5, 8.5}, {8.5, 10.5}, {12.25, 12.75}}});
  EXPECT_DOUBLE_EQ(r.times[0][0].free_s, 2.75);
  EXPECT_DOUBLE_EQ(r.times[0][1].free_s, 5.5);
  EXPECT_DOUBLE_EQ(timing_metrics(s, r.times).makespan_s, 14.75);
  // The last stage's forward sends nothing: it is free when it ends.
  EXPECT_DOUBLE_EQ(r.times[1][0].free_s, 3.75);
}

TEST(Simulator, CriticalPathOfOneDeviceIsEveryAction) {
  const Schedule s = generate_schedule("1f1b", 1, 5, 2);
  const SimResult r = simulate(s, uniform(1, 1.0, 2.0, 0.5), {false});
  EXPECT_EQ(r.critical_path.actions.size(), s.devices[0].size());
  EXPECT_DOUBLE_EQ(r.critical_path.compute_s, r.critical_path.length_s);
  EXPECT_DOUBLE_EQ(r.critical_path.communication_s, 0.0);
}

TEST(Simulator, DeterministicAndTraceIsWellFormed) {
  UniformCosts u;
  u.latency_s = 0.1;
  u.bandwidth_bytes_per_s = 1e3;
  u.message_bytes = 100;
  u.activation_bytes = 10;
  const Schedule s = generate_schedule("paci", 4, 3, 3);
  const SimResult a = simulate(s, uniform_cost_model(4, u), {true});
  const SimResult b = simulate(s, uniform_cost_model(4, u), {true});
  for (std::size_t d = 0; d < a.times.size(); ++d)
    for (std::size_t i = 0; i < a.times[d].size(); ++i) {
      EXPECT_EQ(a.times[d][i].start_s, b.times[d][i].start_s);
      EXPECT_EQ(a.times[d][i].end_s, b.times[d][i].end_s);
    }
  const auto trace = nlohmann::json::parse(chrome_trace_json(a.timeline));
  EXPECT_EQ(check_trace(trace), std::vector<std::string>{});
  std::size_t compute = 0, flows = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "X" && e["tid"] == 0) ++compute;
    if (e["ph"] == "s") ++flows;
  }
  EXPECT_EQ(compute, s.num_actions());
  EXPECT_EQ(flows, a.timeline.messages.size());
  EXPECT_EQ(flows, 2u * 3u * 9u);  // 3 links each way, 9 micro-batches
}

TEST(Simulator, RejectsACostModelOfTheWrongSize) {
  const Schedule s = generate_schedule("1f1b", 4, 4, 1);
  EXPECT_THROW(simulate(s, uniform(3, 1, 2)), InputError);
}

}  // namespace
}  // namespace paci
