// DualPipeV: the generator against PyTorch's own order (a golden CSV written by torch 2.15.0's
// ScheduleDualPipeV), its refusals, the overlapped pair's rules in validate() and the simulator,
// and the bubble and memory rows of DualPipe's README table (deepseek-ai/DualPipe, "Pipeline
// Bubbles and Memory Usage Comparison"), reproduced by simulating the generated schedules.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <vector>

#include "schedules/formats.hpp"
#include "schedules/generators.hpp"
#include "schedules/index.hpp"
#include "schedules/validate.hpp"
#include "sim/cost_model.hpp"
#include "sim/engine.hpp"
#include "tests/schedules/readme_table.hpp"
#include "traces/metrics.hpp"

namespace paci {
namespace {

using ::testing::HasSubstr;

const std::string kGolden = PACI_GOLDEN_DIR;

std::string expect_invalid(const Schedule& s) {
  try {
    validate(s);
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an invalid schedule";
  return "";
}

TEST(DualPipeV, EqualsPyTorchsOwnOrder) {
  // tests/interop/dump_pytorch_schedule.py --schedule DualPipeV --ranks 3 --microbatches 7
  const Schedule theirs = read_schedule(kGolden + "/pytorch_dualpipev.csv");
  const Schedule ours = generate_schedule("dualpipev", 3, 7, 1);
  EXPECT_EQ(theirs.placement, ours.placement);  // the V, as the rows place it
  ASSERT_EQ(theirs.devices.size(), ours.devices.size());
  for (std::size_t d = 0; d < ours.devices.size(); ++d) {
    EXPECT_EQ(theirs.devices[d], ours.devices[d]) << "device " << d;
    for (std::size_t i = 0; i < ours.devices[d].size(); ++i)
      EXPECT_EQ(theirs.devices[d][i].overlap, ours.devices[d][i].overlap)
          << "device " << d << " action " << to_string(ours.devices[d][i]);
  }
  EXPECT_TRUE(ours.has_overlap());
}

TEST(DualPipeV, EveryConfigurationIsValidWithItsPairsAndMixedBackwards) {
  for (std::int32_t P : {1, 2, 3, 4, 5, 8})
    for (std::int32_t M : {2 * P, 2 * P + 1, 3 * P, 20})
      for (std::int32_t N : {1, 3}) {
        if (M < 2 * P) continue;
        const std::string what = fmt::format("P={} M={} N={}", P, M, N);
        const Schedule s = generate_schedule("dualpipev", P, M, N);
        ASSERT_NO_THROW(validate(s)) << what;
        EXPECT_EQ(s.stages, 2 * P) << what;
        for (std::int32_t d = 0; d < P; ++d) {
          EXPECT_EQ(s.placement[static_cast<std::size_t>(d)], d) << what;
          EXPECT_EQ(s.placement[static_cast<std::size_t>(2 * P - 1 - d)], d) << what;
          // Step 4 overlaps two pairs a round, M − 2P + d + 1 rounds (the last device's first
          // forward and backward apart), and step 5 one a round, P − d − 1 rounds; per step.
          const std::int64_t pairs =
              std::count_if(s.devices[static_cast<std::size_t>(d)].begin(),
                            s.devices[static_cast<std::size_t>(d)].end(),
                            [](const Action& a) { return a.overlap == Overlap::first; });
          const std::int64_t per_step =
              2 * (M - 2 * P + d + 1) - (d == P - 1 ? 1 : 0) + (P - d - 1);
          EXPECT_EQ(pairs, per_step * N) << what << " device " << d;
        }
      }
}

TEST(DualPipeV, RefusesTooFewMicroBatchesAndOtherChunks) {
  try {
    generate_schedule("dualpipev", 4, 7, 1);
    ADD_FAILURE() << "M < 2P accepted";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("M >= 2P = 8"));
    EXPECT_THAT(e.what(), HasSubstr("got M=7"));
  }
  try {
    generate_schedule("dualpipev", 4, 8, 1, 3);
    ADD_FAILURE() << "3 chunks accepted";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("--chunks 3: dualpipev places two model stages"));
  }
}

TEST(DualPipeV, PairsMustBeAForwardThenAFullBackwardOfOtherMicroBatches) {
  const Schedule good = generate_schedule("dualpipev", 2, 4, 1);
  // Find a pair on device 0 and break it each way.
  const auto& list = good.devices[0];
  const auto first = static_cast<std::size_t>(
      std::find_if(list.begin(), list.end(),
                   [](const Action& a) { return a.overlap == Overlap::first; }) -
      list.begin());
  ASSERT_LT(first + 1, list.size());
  Schedule open = good;
  open.devices[0][first + 1].overlap = Overlap::none;
  EXPECT_THAT(expect_invalid(open), HasSubstr("opens an overlapped pair that has no second"));
  Schedule closed = good;
  closed.devices[0][first].overlap = Overlap::none;
  EXPECT_THAT(expect_invalid(closed), HasSubstr("closes an overlapped pair that was not opened"));
  Schedule split = good;
  for (auto& l : split.devices)
    for (Action& a : l)
      if (a == list[first + 1]) a.kind = ActionKind::I;
  split.devices[0].insert(split.devices[0].begin() + static_cast<std::ptrdiff_t>(first) + 2,
                          Action{ActionKind::W, list[first + 1].stage, list[first + 1].microbatch});
  EXPECT_THAT(expect_invalid(split), HasSubstr("a pair is a forward and a full backward"));
  // A pair whose backward needs its own forward can never start.
  Schedule own;
  own.kind = "custom";
  own.stages = 1;
  own.placement = {0};
  own.microbatches = 1;
  own.steps = 1;
  own.devices = {{Action{ActionKind::F, 0, 0, Overlap::first},
                  Action{ActionKind::B, 0, 0, Overlap::second}, Action{ActionKind::U, 0, -1}}};
  EXPECT_THAT(expect_invalid(own), HasSubstr("deadlock"));
}

using testing::costs;
using testing::idle;

// DualPipe's README, per row, with PP pipeline stages: bubble, parameters and activations per
// device (in one stage's weights, and one stage's activations of one micro-batch).
//   1F1B       (PP − 1)(F + B)           1×   PP
//   ZB1P       (PP − 1)(F + B − 2W)      1×   PP
//   DualPipeV  (PP/2 − 1)(F&B + B − 3W)  2×   PP + 1   (on PP/2 devices)
// B is a full backward (its input-gradient half I = B − W). The 1F1B and ZB1P bubbles are every
// device's; DualPipeV's is its last devices' (the others idle less), and exact when F = I and
// W <= F, as the README's figures draw them, for any F&B from max(F, B) up to (not at) F + B: a
// pair that hides nothing runs as two actions, as paci's executors run it, and idles less.
TEST(DualPipeReadme, OneFOneBRow) {
  for (const auto& [F, B] : std::vector<std::pair<double, double>>{{1, 2}, {1, 3}, {2, 3}})
    for (std::int32_t PP : {2, 4, 8}) {
      std::vector<std::int64_t> peaks;
      const Schedule s = generate_schedule("1f1b", PP, 3 * PP, 1);
      for (const double x : idle(s, costs(PP, F, B, B / 2, {}), &peaks))
        EXPECT_DOUBLE_EQ(x, (PP - 1) * (F + B)) << "PP=" << PP;
      EXPECT_EQ(*std::max_element(peaks.begin(), peaks.end()), 4000 + PP);
    }
}

TEST(DualPipeReadme, ZeroBubbleOneRow) {
  for (const auto& [F, B, W] :
       std::vector<std::array<double, 3>>{{1, 2, 1}, {1, 3, 1}, {1, 1.5, 0.5}, {2, 3, 1}})
    for (std::int32_t PP : {2, 4, 8}) {
      std::vector<std::int64_t> peaks;
      const Schedule s = generate_schedule("zb-h1", PP, 3 * PP, 1);
      for (const double x : idle(s, costs(PP, F, B, W, {}), &peaks))
        EXPECT_DOUBLE_EQ(x, (PP - 1) * (F + B - 2 * W)) << "PP=" << PP;
      EXPECT_EQ(*std::max_element(peaks.begin(), peaks.end()), 4000 + PP);
    }
}

TEST(DualPipeReadme, DualPipeVRow) {
  int checked = 0;
  for (const auto& [F, W] : std::vector<std::pair<double, double>>{
           {1, 1}, {1, 0.5}, {1, 0.25}, {2, 1}, {1.5, 0.75}, {3, 1}})
    for (std::int32_t devices : {2, 3, 4, 8}) {
      const std::int32_t PP = 2 * devices;
      const double B = F + W;  // I = F
      for (const double FB :
           {std::max(F, B), (std::max(F, B) + F + B) / 2, (std::max(F, B) + 3 * (F + B)) / 4})
        for (const std::int32_t M : {PP, PP + 3, 3 * PP}) {
          const std::string what =
              fmt::format("PP={} M={} F={} B={} W={} F&B={}", PP, M, F, B, W, FB);
          std::vector<std::int64_t> peaks;
          const auto x =
              idle(generate_schedule("dualpipev", devices, M, 1), costs(PP, F, B, W, FB), &peaks);
          EXPECT_NEAR(*std::max_element(x.begin(), x.end()), (PP / 2 - 1) * (FB + B - 3 * W), 1e-9)
              << what;
          for (const std::int64_t peak : peaks) {  // two stages' state, PP + 1 activations
            EXPECT_EQ(peak, 2 * 4000 + PP + 1) << what;
          }
          ++checked;
        }
      // F&B = F + B hides nothing: two actions, the forward free to start on its own input.
      const auto x = idle(generate_schedule("dualpipev", devices, PP + 3, 1),
                          costs(PP, F, B, W, F + B), nullptr);
      EXPECT_LE(*std::max_element(x.begin(), x.end()), (PP / 2 - 1) * (F + B + B - 3 * W) + 1e-9);
    }
  EXPECT_EQ(checked, 6 * 4 * 3 * 3);
}

// A pair that hides something waits for both inputs and sends both outputs when both are done;
// one that hides nothing is two actions back to back, each waiting for its own input and sending
// at its own end (the CPU executor's order). Messages take 0.3 s, so waits show.
TEST(DualPipeV, SimulatedPairsStartTogetherAndSendTogether) {
  const Schedule s = generate_schedule("dualpipev", 3, 8, 1);
  for (const bool overlapped : {false, true}) {
    SCOPED_TRACE(overlapped ? "F&B 2 s" : "F&B = F + B");
    CostModel c = costs(6, 1.0, 2.0, 1.0, overlapped ? std::optional(2.0) : std::nullopt);
    c.default_link.latency_s = 0.3;
    const SimResult r = simulate(s, c, {true});
    const auto arrival = [&](const Action& consumer, std::int32_t device) {
      double t = 0.0;  // when its cross-device input arrived, 0 if none
      for (const auto& m : r.timeline.messages)
        if (m.consumer == consumer && m.dst_device == device) t = std::max(t, m.recv_end_s);
      return t;
    };
    int sends = 0, waits = 0;
    for (std::size_t d = 0; d < s.devices.size(); ++d) {
      const auto& list = s.devices[d];
      const auto device = static_cast<std::int32_t>(d);
      for (std::size_t i = 0; i + 1 < list.size(); ++i) {
        if (list[i].overlap != Overlap::first) continue;
        const ActionTime& f = r.times[d][i];
        const ActionTime& b = r.times[d][i + 1];
        const double backward_input = arrival(list[i + 1], device);
        if (overlapped) {  // one unit: both inputs first, 2 s in all
          EXPECT_DOUBLE_EQ(b.start_s, f.end_s);
          EXPECT_NEAR(b.end_s - f.start_s, 2.0, 1e-12);
          EXPECT_GE(f.start_s, backward_input - 1e-12) << to_string(list[i]);
        } else {  // two actions: F 1 s, then B 2 s once its input is there
          EXPECT_NEAR(f.end_s - f.start_s, 1.0, 1e-12);
          EXPECT_NEAR(b.end_s - b.start_s, 2.0, 1e-12);
          EXPECT_GE(b.start_s, std::max(f.end_s, backward_input) - 1e-12);
          if (f.start_s < backward_input - 1e-12) ++waits;  // the F went ahead
        }
        for (const auto& m : r.timeline.messages) {
          if (!(m.producer == list[i]) || m.src_device != device) continue;
          EXPECT_DOUBLE_EQ(m.send_start_s, overlapped ? b.end_s : f.end_s) << to_string(list[i]);
          ++sends;
        }
      }
    }
    EXPECT_GT(sends, 0);
    if (!overlapped) {
      EXPECT_GT(waits, 0);  // some forward started before its partner's input
    }
  }
}

// A pair slowed so much that overlapping costs more than it hides runs as its two actions, each
// at its own speed: the same step as a pair with nothing to hide.
TEST(DualPipeV, APairThatDoesNotPayRunsAsTwoActionsAtTheirOwnSpeed) {
  const Schedule s = generate_schedule("dualpipev", 2, 4, 1);
  const CostModel plain = costs(4, 1.0, 2.0, 1.0, std::nullopt);
  CostModel slowed = plain;
  for (StageCost& c : slowed.stages) {
    c.forward_comm_s = 0.1;
    c.backward_comm_s = 0.1;
    c.pair_compute_slowdown = 2.0;  // pair: 1.8 + 3.8 + 0.2 - 0.2 = 5.6 s > F + B = 3 s
  }
  const auto makespan = [&](const CostModel& c) {
    return run_summary(s, c, simulate(s, c, {false})).timing.makespan_s;
  };
  EXPECT_DOUBLE_EQ(makespan(slowed), makespan(plain));
  const SimResult r = simulate(s, slowed, {false});
  int paired = 0;
  for (std::size_t d = 0; d < s.devices.size(); ++d)
    for (std::size_t i = 0; i < s.devices[d].size(); ++i) {
      const Action& a = s.devices[d][i];
      if (a.overlap == Overlap::none) continue;
      ++paired;  // each half at its own speed: F 1 s, B 2 s
      EXPECT_DOUBLE_EQ(r.times[d][i].end_s - r.times[d][i].start_s,
                       a.kind == ActionKind::F ? 1.0 : 2.0);
    }
  EXPECT_GT(paired, 0);
}

TEST(DualPipeV, PairTimeHidesCommunicationBehindTheOthersCompute) {
  StageCost f, b;
  f.forward_s = 1.0;
  b.backward_s = 2.0;
  EXPECT_DOUBLE_EQ(pair_duration_s(f, b), 3.0);  // nothing stated: back to back
  f.forward_comm_s = 0.25;
  b.backward_comm_s = 0.5;
  EXPECT_DOUBLE_EQ(pair_duration_s(f, b), 2.25);  // all 0.75 s hidden behind 2.25 s of compute
  f.forward_comm_s = 1.0;
  b.backward_comm_s = 1.5;
  EXPECT_DOUBLE_EQ(pair_duration_s(f, b), 2.5);  // only 0.5 s of compute to hide behind
  f.forward_comm_s = 0.1;  // the backward's 1.5 s hides behind the forward's 0.9 s only,
  EXPECT_DOUBLE_EQ(pair_duration_s(f, b), 2.0);  // never behind its own: max(F, B) at least
  // The communication kernels hold SMs: the compute parts run k times slower while paired.
  f.forward_comm_s = 0.25;
  b.backward_comm_s = 0.5;
  b.pair_compute_slowdown = 1.25;  // the larger of the two stages' applies
  // compute 0.75·1.25 + 1.5·1.25 = 2.8125, the 0.75 s of communication all behind it
  EXPECT_DOUBLE_EQ(pair_duration_s(f, b), 2.8125);
  b.pair_compute_slowdown = 2.0;  // 4.5 s: longer than F + B, so the engine runs them apart
  EXPECT_DOUBLE_EQ(pair_duration_s(f, b), 4.5);
  CostModel costs = uniform_cost_model(2, {});
  costs.stages[1].pair_compute_slowdown = 0.5;
  EXPECT_THROW(check_cost_model(costs), InputError);  // faster than alone
  costs.stages[1].pair_compute_slowdown = 1.5;
  EXPECT_EQ(parse_cost_model(write_cost_model(costs), "x.json").stages[1], costs.stages[1]);
  UniformCosts u;
  u.tfb = 1.5;  // below max(F, B) = 2
  EXPECT_THROW(uniform_cost_model(2, u), InputError);
  u.tfb = 3.5;  // above F + B = 3
  EXPECT_THROW(uniform_cost_model(2, u), InputError);
  u.tfb = 2.5;
  const CostModel m = uniform_cost_model(2, u);
  EXPECT_DOUBLE_EQ(pair_duration_s(m.stages[0], m.stages[1]), 2.5);
  EXPECT_EQ(parse_cost_model(write_cost_model(m), "m.json"), m);  // the comm parts round-trip
  CostModel bad = m;
  bad.stages[0].forward_comm_s = 1.5;  // more than its forward
  EXPECT_THROW(check_cost_model(bad), InputError);
}

}  // namespace
}  // namespace paci
