// Zero Bubble (zb-h1, zb-h2) and Megatron's interleaved 1F1B: every configuration P <= 16 the
// definitions allow is valid and complete, flushed (no staleness), within its activation budget;
// at unit costs (t_F = t_I = t_W) the simulator gives the Zero Bubble paper's makespans, and the
// interleaved bubble shrinks by the number of chunks.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <string>

#include "schedules/analysis.hpp"
#include "schedules/generators.hpp"
#include "schedules/validate.hpp"
#include "sim/cost_model.hpp"
#include "sim/engine.hpp"
#include "traces/metrics.hpp"

namespace paci {
namespace {

std::string name(const std::string& kind, std::int32_t P, std::int32_t M, std::int32_t N,
                 std::int32_t v = 1) {
  return fmt::format("{} P={} M={} N={} v={}", kind, P, M, N, v);
}

// Per stage: how many of each kind, and that the stage's actions sit on device stage mod P.
void expect_complete(const Schedule& s, std::int32_t P, bool split, const std::string& what) {
  const std::int64_t T = s.total_microbatches();
  std::vector<std::array<std::int64_t, 5>> count(static_cast<std::size_t>(s.stages));
  for (std::int32_t d = 0; d < P; ++d)
    for (const Action& a : s.devices[static_cast<std::size_t>(d)]) {
      ASSERT_EQ(a.stage % P, d) << what;
      ++count[static_cast<std::size_t>(a.stage)][static_cast<std::size_t>(a.kind)];
    }
  for (const auto& c : count) {
    EXPECT_EQ(c[static_cast<std::size_t>(ActionKind::F)], T) << what;
    EXPECT_EQ(c[static_cast<std::size_t>(ActionKind::B)], split ? 0 : T) << what;
    EXPECT_EQ(c[static_cast<std::size_t>(ActionKind::I)], split ? T : 0) << what;
    EXPECT_EQ(c[static_cast<std::size_t>(ActionKind::W)], split ? T : 0) << what;
    EXPECT_EQ(c[static_cast<std::size_t>(ActionKind::U)], s.steps) << what;
  }
}

TEST(ZeroBubble, EveryConfigurationIsValidFlushedAndWithinItsMemory) {
  for (const std::string kind : {"zb-h1", "zb-h2"})
    for (std::int32_t P = 1; P <= 16; ++P)
      for (std::int32_t M = 1; M <= 24; M += (M < 8 ? 1 : 5))
        for (std::int32_t N = 1; N <= 3; ++N) {
          const std::string what = name(kind, P, M, N);
          const Schedule s = generate_schedule(kind, P, M, N);
          ASSERT_NO_THROW(validate(s)) << what;
          expect_complete(s, P, true, what);
          const Analysis a = analyze(s);
          for (const auto& st : a.stages) {
            EXPECT_EQ(st.max_staleness, 0) << what;
            EXPECT_EQ(st.max_update_delay, 0) << what;
            EXPECT_EQ(st.peak_weight_versions, 1) << what;
            // Activations are held from F to W: ZB-H1 at most 1F1B's peak (P), ZB-H2 2P - 1.
            EXPECT_LE(st.peak_activations, kind == "zb-h1" ? P : 2 * P - 1) << what;
            EXPECT_LE(st.peak_activations, M) << what;
          }
          if (kind == "zb-h1") {  // stage 0: its P - s = P warm-up forwards
            EXPECT_EQ(a.stages.front().peak_activations, std::min(P, M)) << what;
          }
        }
}

TEST(ZeroBubble, ZbH1FollowsThePapersFigure) {
  // Qi et al., figure 3 (ZB-H1, 4 stages): stage s runs 4 - s forwards, then I, the W lagging s
  // micro-batches, and the next F; the last stage's W's all come at the end.
  const Schedule s = generate_schedule("zb-h1", 4, 8, 1);
  const auto text = [&](std::int32_t d) {
    std::string out;
    for (const Action& a : s.devices[static_cast<std::size_t>(d)]) out += to_string(a) + " ";
    return out;
  };
  EXPECT_EQ(text(0),
            "0F0 0F1 0F2 0F3 0I0 0W0 0F4 0I1 0W1 0F5 0I2 0W2 0F6 0I3 0W3 0F7 0I4 0W4 0I5 0W5 0I6 "
            "0W6 0I7 0W7 0U ");
  EXPECT_EQ(text(3),
            "3F0 3I0 3F1 3I1 3F2 3I2 3F3 3I3 3W0 3F4 3I4 3W1 3F5 3I5 3W2 3F6 3I6 3W3 3F7 3I7 3W4 "
            "3W5 3W6 3W7 3U ");
}

// Unit costs: t_F = t_I = t_W = 1, free links, no optimizer time.
SimResult unit_run(const Schedule& s) {
  UniformCosts u;
  u.tf = 1.0;
  u.tb = 2.0;
  u.tw = 1.0;
  u.tu = 0.0;
  return simulate(s, uniform_cost_model(s.stages, u), {false});
}

TEST(ZeroBubble, UnitCostMakespansAreThePapers) {
  for (std::int32_t P : {2, 4, 8, 16})
    for (std::int32_t M : {P, 2 * P, 3 * P + 1}) {
      const std::string what = fmt::format("P={} M={}", P, M);
      const auto makespan = [&](const std::string& kind) {
        const Schedule s = generate_schedule(kind, P, M, 1);
        return timing_metrics(s, unit_run(s).times);
      };
      // 1F1B: 3M + 3(P-1); ZB-H1: 3M + (P-1), a third of the bubble; ZB-H2 no more than that,
      // and no bubble inside any stage's span (the paper's measure).
      EXPECT_DOUBLE_EQ(makespan("1f1b").makespan_s, 3.0 * M + 3.0 * (P - 1)) << what;
      const TimingMetrics h1 = makespan("zb-h1"), h2 = makespan("zb-h2");
      EXPECT_DOUBLE_EQ(h1.makespan_s, 3.0 * M + (P - 1)) << what;
      EXPECT_LE(h2.makespan_s, 3.0 * M + (P - 1)) << what;
      EXPECT_NEAR(h1.zb_bubble_ratio, (P - 1.0) / (3.0 * M + P - 1), 1e-12) << what;
      EXPECT_LT(h2.zb_bubble_ratio, h1.zb_bubble_ratio + 1e-12) << what;
    }
}

// ZB-V (the paper's order, PyTorch's ScheduleZBVZeroBubble's): stages s and 2P - 1 - s on device
// s; at unit costs (F = I = W = 1 per stage) its step is 6M plus a fill of P - 1 once M >= 2P - 1
// (the paper's zero bubble past the warm-up), at most 4(P - 1) below that (its order is laid out
// for 2P - 1 micro-batches); a stage holds at most 2P micro-batches' activations, a device at most
// 2P + 1 half-stages' (1F1B's P whole stages, and one half more).
TEST(ZeroBubble, ZbVFillsPMinusOneAndHoldsAboutOneFOneBsMemoryInAV) {
  for (std::int32_t P = 1; P <= 12; ++P)
    for (std::int32_t M = 1; M <= 3 * P; M += (M < P ? 1 : P))
      for (std::int32_t N = 1; N <= 2; ++N) {
        const std::string what = name("zb-v", P, M, N, 2);
        const Schedule s = generate_schedule("zb-v", P, M, N);
        ASSERT_EQ(s.stages, 2 * P) << what;
        for (std::int32_t st = 0; st < 2 * P; ++st)
          EXPECT_EQ(s.placement[static_cast<std::size_t>(st)], st < P ? st : 2 * P - 1 - st)
              << what;
        ASSERT_NO_THROW(validate(s)) << what;
        const Analysis a = analyze(s);
        std::vector<std::int32_t> device(static_cast<std::size_t>(P), 0);
        for (std::size_t st = 0; st < a.stages.size(); ++st) {
          EXPECT_EQ(a.stages[st].max_staleness, 0) << what;
          EXPECT_EQ(a.stages[st].peak_weight_versions, 1) << what;
          EXPECT_LE(a.stages[st].peak_activations, std::min(2 * P, M)) << what;
          device[static_cast<std::size_t>(s.placement[st])] += a.stages[st].peak_activations;
        }
        EXPECT_LE(*std::max_element(device.begin(), device.end()), 2 * P + 1) << what;
        if (N == 1) {
          const double fill = timing_metrics(s, unit_run(s).times).makespan_s - 6.0 * M;
          EXPECT_GE(fill, 0.0) << what;
          if (M >= 2 * P - 1) {
            EXPECT_EQ(fill, P - 1.0) << what;
          } else {  // no more than one micro-batch's way down and back up the V
            EXPECT_LE(fill, 4.0 * (P - 1)) << what;
          }
        }
      }
  EXPECT_THROW(generate_schedule("zb-v", 4, 8, 1, 3), InputError);  // a V has two chunks
}

// A split backward keeps, from I to W, the output gradients W needs: the simulator counts them on
// top of the activations, as many as the device's list has between its I's and W's.
TEST(ZeroBubble, MemoryCountsTheGradientsKeptForW) {
  for (const std::string kind : {"zb-h1", "zb-h2"}) {
    const Schedule s = generate_schedule(kind, 4, 8, 2);
    UniformCosts u;
    CostModel costs = uniform_cost_model(s.stages, u);
    for (StageCost& c : costs.stages) c.weight_grad_stash_bytes = 1000;
    EXPECT_EQ(parse_cost_model(write_cost_model(costs), "kept"), costs);  // the optional key
    const SimResult r = simulate(s, costs, {false});
    for (std::int32_t d = 0; d < 4; ++d) {
      std::int64_t held = 0, peak = 0;
      for (const Action& a : s.devices[static_cast<std::size_t>(d)]) {
        held += a.kind == ActionKind::I ? 1 : a.kind == ActionKind::W ? -1 : 0;
        peak = std::max(peak, held);
      }
      EXPECT_EQ(r.device_peak_memory_bytes[static_cast<std::size_t>(d)], 1000 * peak)
          << kind << " device " << d;
      if (kind == "zb-h1") {
        EXPECT_EQ(peak, d + 1) << d;  // W lags d micro-batches behind I
      }
    }
  }
}

// A split backward may free part of its activations at I (Zero Bubble's Megatron-LM keeps only
// W's inputs): from I to W a micro-batch holds its activations less that, plus its gradients.
TEST(ZeroBubble, MemoryFreesAtIWhatWDoesNotRead) {
  for (const std::string kind : {"zb-h1", "zb-h2"}) {
    const Schedule s = generate_schedule(kind, 4, 8, 2);
    CostModel costs = uniform_cost_model(s.stages, UniformCosts{});
    for (StageCost& c : costs.stages) {
      c.activation_bytes = 5000;
      c.input_grad_release_bytes = 3000;
      c.weight_grad_stash_bytes = 1000;
    }
    EXPECT_EQ(parse_cost_model(write_cost_model(costs), "released"), costs);  // the optional key
    const SimResult r = simulate(s, costs, {false});
    for (std::int32_t d = 0; d < 4; ++d) {
      std::int64_t in_flight = 0, awaiting = 0, peak = 0;
      for (const Action& a : s.devices[static_cast<std::size_t>(d)]) {
        in_flight += a.kind == ActionKind::F ? 1 : a.kind == ActionKind::W ? -1 : 0;
        peak = std::max(peak, 5000 * in_flight - 2000 * awaiting);
        awaiting += a.kind == ActionKind::I ? 1 : a.kind == ActionKind::W ? -1 : 0;
      }
      EXPECT_EQ(r.device_peak_memory_bytes[static_cast<std::size_t>(d)], peak)
          << kind << " device " << d;
    }
    // More than it holds: refused in one line.
    costs.stages[1].input_grad_release_bytes = 6000;
    try {
      check_cost_model(costs);
      ADD_FAILURE() << "a release above the activations was accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("stages[1].input_grad_release_bytes (6000) is more "
                                           "than its activation_bytes (5000)"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(Interleaved, EveryConfigurationIsValidAndShrinksTheBubble) {
  for (std::int32_t P = 1; P <= 16; ++P)
    for (std::int32_t v : {1, 2, 3, 4})
      for (std::int32_t M = P; M <= 3 * P; M += P)
        for (std::int32_t N = 1; N <= 2; ++N) {
          const std::string what = name("interleaved", P, M, N, v);
          const Schedule s = generate_schedule("interleaved", P, M, N, v);
          ASSERT_EQ(s.stages, P * v) << what;
          ASSERT_NO_THROW(validate(s)) << what;
          expect_complete(s, P, false, what);
          for (const auto& st : analyze(s).stages) EXPECT_EQ(st.max_staleness, 0) << what;
        }
  // At unit costs per chunk (t_F = 1, t_B = 2), a device's work per micro-batch is 3v and the
  // bubble (P-1)·3, a v-th of 1F1B's on the same devices (Narayanan et al., 2021).
  for (std::int32_t P : {2, 4, 8})
    for (std::int32_t v : {1, 2, 4}) {
      const std::int32_t M = 2 * P;
      const Schedule s = generate_schedule("interleaved", P, M, 1, v);
      UniformCosts u;
      u.tf = 1.0;
      u.tb = 2.0;
      u.tu = 0.0;
      const TimingMetrics t =
          timing_metrics(s, simulate(s, uniform_cost_model(s.stages, u), {false}).times);
      EXPECT_DOUBLE_EQ(t.makespan_s, 3.0 * v * M + 3.0 * (P - 1)) << P << " " << v;
    }
}

TEST(Generators, RejectImpossibleNewConfigurations) {
  EXPECT_THROW(generate_schedule("interleaved", 4, 6, 1), InputError);  // M not a multiple of P
  EXPECT_THROW(generate_schedule("1f1b", 4, 4, 1, 2), InputError);      // chunks: interleaved only
  EXPECT_THROW(generate_schedule("interleaved", 4, 4, 1, -1), InputError);
  EXPECT_NO_THROW(generate_schedule("interleaved", 4, 4, 1, 1));
}

}  // namespace
}  // namespace paci
