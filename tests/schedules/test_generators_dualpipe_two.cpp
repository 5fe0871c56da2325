// DualPipe itself (two copies of the model in opposite directions): the generator against
// DeepSeek's DualPipe.step written out by its phases, the two-copy IR (placement, which copy a
// micro-batch runs on, twins), its refusals and file formats, the twins' gradient exchange before
// each update in the simulator, and the DualPipe row of DualPipe's README table (bubble
// (PP/2 − 1)(F&B + B − 3W), parameters 2×, activations PP + 1) reproduced by simulating it.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <deque>
#include <map>
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

// DualPipe.step of deepseek-ai/DualPipe (dualpipe/dualpipe.py) on rank r of P with M chunks,
// written out by its eight steps and phases, not through DualPipeV as the generator is: phase p
// on rank r runs the forward direction (copy 0, its stage r) when p ^ (r >= P/2) is 0, the
// reverse direction (copy 1, its stage P + (P − 1 − r)) otherwise; each direction takes half the
// chunks, copy 1 the second half; _weight_chunk runs the oldest W queued by a zero-bubble
// backward; _forward_backward_chunk(p0, p1) is the overlapped pair (F of p0; B of p1).
std::vector<Action> deepseek_order(std::int32_t P, std::int32_t M, std::int32_t r) {
  const std::int32_t half_ranks = P / 2, h = std::min(r, P - 1 - r), half = M / 2;
  const int second_half = r >= half_ranks ? 1 : 0;
  const bool middle = r == half_ranks - 1 || r == half_ranks;
  std::array<std::int32_t, 2> next_f{0, 0}, next_b{0, 0};
  std::deque<Action> weights;
  std::vector<Action> out;
  const auto stage = [&](int dir) { return dir == 0 ? r : P + (P - 1 - r); };
  const auto fwd = [&](int phase) {
    const int dir = phase ^ second_half;
    out.push_back({ActionKind::F, stage(dir), dir * half + next_f[dir]++});
  };
  const auto bwd = [&](int phase, bool zb) {
    const int dir = phase ^ second_half;
    const std::int32_t mb = dir * half + next_b[dir]++;
    out.push_back({zb ? ActionKind::I : ActionKind::B, stage(dir), mb});
    if (zb) weights.push_back({ActionKind::W, stage(dir), mb});
  };
  const auto weight = [&] {
    EXPECT_FALSE(weights.empty());  // WeightGradStore.pop asserts it
    if (weights.empty()) return;
    out.push_back(weights.front());
    weights.pop_front();
  };
  const auto pair = [&](int p0, int p1) {
    fwd(p0);
    bwd(p1, false);
    out[out.size() - 2].overlap = Overlap::first;
    out.back().overlap = Overlap::second;
  };
  for (std::int32_t i = 0; i < (half_ranks - h - 1) * 2; ++i) fwd(0);  // step 1: nF0
  for (std::int32_t i = 0; i < h + 1; ++i) {                           // step 2: nF0F1
    fwd(0);
    fwd(1);
  }
  for (std::int32_t i = 0; i < half_ranks - h - 1; ++i) {  // step 3: nB1W1F1
    bwd(1, true);
    weight();
    fwd(1);
  }
  for (std::int32_t i = 0; i < half - P + h + 1; ++i) {  // step 4: nF0B1F1B0
    if (i == 0 && middle) {
      fwd(0);  // "We don't overlap these two chunks to further reduce bubble size."
      bwd(1, false);
    } else {
      pair(0, 1);
    }
    pair(1, 0);
  }
  for (std::int32_t i = 0; i < half_ranks - h - 1; ++i) {  // step 5: nB1F1B0
    bwd(1, false);
    pair(1, 0);
  }
  bool zb = false;  // step 6: nB1B0, the second half zero-bubble
  for (std::int32_t i = 0; i < h + 1; ++i) {
    if (i == (h + 1) / 2 && h % 2 == 1) zb = true;
    bwd(1, zb);
    if (i == (h + 1) / 2 && h % 2 == 0) zb = true;
    bwd(0, zb);
  }
  for (std::int32_t i = 0; i < half_ranks - h - 1; ++i) {  // step 7: nWB0
    weight();
    bwd(0, true);
  }
  for (std::int32_t i = 0; i < h + 1; ++i) weight();  // step 8: nW
  EXPECT_TRUE(weights.empty());
  return out;
}

TEST(DualPipe, EqualsDeepSeeksStepPhaseByPhase) {
  int checked = 0;
  for (std::int32_t P : {2, 4, 6, 8})
    for (std::int32_t M : {2 * P, 2 * P + 2, 4 * P, 20}) {
      if (M < 2 * P) continue;
      const Schedule s = generate_schedule("dualpipe", P, M, 1);
      for (std::int32_t r = 0; r < P; ++r) {
        std::vector<Action> ours;
        for (const Action& a : s.devices[static_cast<std::size_t>(r)])
          if (a.kind != ActionKind::U) ours.push_back(a);
        const std::vector<Action> theirs = deepseek_order(P, M, r);
        ASSERT_EQ(ours.size(), theirs.size()) << "P=" << P << " M=" << M << " rank " << r;
        for (std::size_t i = 0; i < ours.size(); ++i) {
          EXPECT_EQ(ours[i], theirs[i]) << "P=" << P << " M=" << M << " rank " << r << " #" << i;
          EXPECT_EQ(ours[i].overlap, theirs[i].overlap) << to_string(ours[i]);
        }
        ++checked;
      }
    }
  EXPECT_EQ(checked, 4 * (2 + 4 + 6 + 8));
}

TEST(DualPipe, EveryConfigurationIsValidOnItsTwoCopies) {
  for (std::int32_t P : {2, 4, 6, 8})
    for (std::int32_t M : {2 * P, 2 * P + 2, 4 * P, 20})
      for (std::int32_t N : {1, 3}) {
        if (M < 2 * P) continue;
        const std::string what = fmt::format("P={} M={} N={}", P, M, N);
        const Schedule s = generate_schedule("dualpipe", P, M, N);
        ASSERT_NO_THROW(validate(s)) << what;
        EXPECT_EQ(s.stages, 2 * P) << what;
        EXPECT_EQ(s.copies, 2) << what;
        EXPECT_TRUE(s.has_overlap()) << what;
        for (std::int32_t j = 0; j < P; ++j) {
          EXPECT_EQ(s.placement[static_cast<std::size_t>(j)], j) << what;  // copy 0 down
          EXPECT_EQ(s.placement[static_cast<std::size_t>(P + j)], P - 1 - j) << what;  // copy 1 up
          EXPECT_EQ(s.twin(j), P + j);
          EXPECT_EQ(s.layer_of(P + j), j);
        }
        // Each micro-batch runs on one copy: the first half of a step's on copy 0.
        for (const auto& list : s.devices)
          for (const Action& a : list) {
            if (a.kind == ActionKind::U) continue;
            EXPECT_EQ(a.stage / P, (a.microbatch % M) < M / 2 ? 0 : 1) << what << to_string(a);
          }
      }
}

TEST(DualPipe, RefusesWhatDualPipeAsserts) {
  const auto refusal = [](std::int32_t P, std::int32_t M, std::int32_t chunks) {
    try {
      generate_schedule("dualpipe", P, M, 1, chunks);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    ADD_FAILURE() << "P=" << P << " M=" << M << " accepted";
    return std::string();
  };
  EXPECT_THAT(refusal(3, 6, 0), HasSubstr("got P=3 M=6 (dualpipev runs on any P)"));
  EXPECT_THAT(refusal(4, 9, 0), HasSubstr("P even, M even, M >= 2P"));
  EXPECT_THAT(refusal(4, 6, 0), HasSubstr("got P=4 M=6"));
  EXPECT_THAT(refusal(4, 8, 3), HasSubstr("--chunks 3: dualpipe places a stage of each"));
  EXPECT_NO_THROW(generate_schedule("dualpipe", 4, 8, 1, 2));
}

TEST(DualPipe, TheIrChecksItsCopies) {
  const Schedule good = generate_schedule("dualpipe", 2, 4, 1);
  Schedule three = good;
  three.copies = 3;
  EXPECT_THROW(check_metadata(three), InputError);
  Schedule odd = good;
  odd.microbatches = 3;
  try {
    check_metadata(odd);
    ADD_FAILURE() << "odd M accepted";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("even number of micro-batches"));
  }
  Schedule together = good;  // copy 1's stage 0 on the device of copy 0's
  together.placement = {0, 1, 0, 1};
  try {
    check_metadata(together);
    ADD_FAILURE() << "twins on one device accepted";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("stages 0 and 2 hold the same layers"));
  }
  // A micro-batch of copy 0 on copy 1's stage: named where it is.
  Schedule wrong = good;
  for (auto& list : wrong.devices)
    for (Action& a : list)
      if (a.kind != ActionKind::U && a.stage == 3 && a.microbatch == 2) a.microbatch = 0;
  try {
    validate(wrong);
    ADD_FAILURE() << "a micro-batch on the other copy accepted";
  } catch (const ScheduleError& e) {
    EXPECT_THAT(e.what(), HasSubstr("micro-batch 0 runs on copy 0 (stages 0..1), stage 3 is copy "
                                    "1's"));
    EXPECT_EQ(e.marked.size(), 1u);
  }
  // Each stage's update follows its copy's M/2 backwards.
  Schedule early = generate_schedule("dualpipe", 2, 8, 1);
  auto& list = early.devices[0];
  const auto u = std::find(list.begin(), list.end(), Action{ActionKind::U, 0, -1});
  ASSERT_NE(u, list.end());
  const Action moved = *u;
  list.erase(u);
  list.insert(list.begin() + 6, moved);
  try {
    validate(early);
    ADD_FAILURE() << "an early update accepted";
  } catch (const ScheduleError& e) {
    EXPECT_THAT(e.what(), HasSubstr("each step accumulates M/2=4 on each copy"));
  }
}

TEST(DualPipe, FilesKeepTheCopiesAndPyTorchRefusesThem) {
  const Schedule s = generate_schedule("dualpipe", 4, 8, 2);
  for (ScheduleFormat f : {ScheduleFormat::json, ScheduleFormat::text, ScheduleFormat::csv}) {
    const Schedule back = parse_schedule(write_schedule(s, f), f, "x");
    EXPECT_EQ(back, s) << to_string(f);
    EXPECT_EQ(back.copies, 2) << to_string(f);
  }
  // One-copy files are written as before: no copies key.
  EXPECT_THAT(write_schedule(generate_schedule("dualpipev", 2, 4, 1), ScheduleFormat::json),
              ::testing::Not(HasSubstr("copies")));
  // PyTorch's runtime has DualPipeV, not DualPipe; its placement alone looks like a V.
  EXPECT_THAT(pytorch_refusal(s), HasSubstr("two copies of the model"));
  EXPECT_THROW(write_schedule(s, ScheduleFormat::pytorch), InputError);
}

using testing::costs;
using testing::idle;

// DualPipe's README, its DualPipe row, with PP devices (PP stages a copy, each holding 1/PP of the
// model): bubble (PP/2 − 1)(F&B + B − 3W), parameters 2× (a stage of each copy on each device),
// activations PP + 1 (in one stage's activations of one micro-batch). As for DualPipeV, the bubble
// is the devices' largest idle time and exact when F = I and W <= F; the twins' gradient exchange
// before the update takes no time here (free links), as the table leaves it out.
TEST(DualPipeReadme, DualPipeRow) {
  int checked = 0;
  for (const auto& [F, W] : std::vector<std::pair<double, double>>{
           {1, 1}, {1, 0.5}, {1, 0.25}, {2, 1}, {1.5, 0.75}, {3, 1}})
    for (std::int32_t PP : {2, 4, 6, 8}) {
      const double B = F + W;  // I = F
      for (const double FB :
           {std::max(F, B), (std::max(F, B) + F + B) / 2, (std::max(F, B) + 3 * (F + B)) / 4})
        for (const std::int32_t M : {2 * PP, 2 * PP + 4, 4 * PP}) {
          const std::string what =
              fmt::format("PP={} M={} F={} B={} W={} F&B={}", PP, M, F, B, W, FB);
          std::vector<std::int64_t> peaks;
          const auto x =
              idle(generate_schedule("dualpipe", PP, M, 1), costs(2 * PP, F, B, W, FB), &peaks);
          EXPECT_NEAR(*std::max_element(x.begin(), x.end()), (PP / 2 - 1) * (FB + B - 3 * W), 1e-9)
              << what;
          for (const std::int64_t peak : peaks) EXPECT_EQ(peak, 2 * 4000 + PP + 1) << what;
          ++checked;
        }
    }
  EXPECT_EQ(checked, 6 * 4 * 3 * 3);
}

// Before its update each stage waits for its twin's gradients of the step: the twin's last
// backward on the other device, then its whole gradient buffer over the link.
TEST(DualPipe, UpdatesWaitForTheTwinsGradients) {
  const Schedule s = generate_schedule("dualpipe", 4, 8, 2);
  CostModel c = costs(8, 1.0, 2.0, 1.0, 2.5);
  c.default_link.latency_s = 0.3;
  c.default_link.bandwidth_bytes_per_s = 1000.0;  // 1000 gradient bytes: 1 s on the wire
  const SimResult r = simulate(s, c, {true});
  const ActionIndex index(s);
  // Every stage receives its twin's gradients once a step: the twin's last backward of the step
  // on the other device, its 1000 bytes 1 s on the wire plus 0.3 s of latency.
  std::map<std::pair<std::int32_t, std::int32_t>, double> arrival;  // (stage, step) -> arrival
  for (const auto& m : r.timeline.messages) {
    if (m.kind != DependencyKind::twin_gradients) continue;
    EXPECT_EQ(m.consumer.kind, ActionKind::U);
    EXPECT_EQ(m.producer.stage, s.twin(m.consumer.stage));
    EXPECT_EQ(m.src_device, s.placement[static_cast<std::size_t>(m.producer.stage)]);
    EXPECT_EQ(m.dst_device, s.placement[static_cast<std::size_t>(m.consumer.stage)]);
    EXPECT_EQ(m.bytes, 1000);
    const ActionPos p = index.find(m.producer);
    const auto& on = s.devices[static_cast<std::size_t>(p.device)];
    for (std::size_t k = static_cast<std::size_t>(p.index) + 1; k < on.size(); ++k) {
      if (on[k].kind == ActionKind::U) break;  // nothing of the twin's step after it
      EXPECT_FALSE(on[k].stage == m.producer.stage) << to_string(on[k]);
    }
    const double producer_end =
        r.times[static_cast<std::size_t>(p.device)][static_cast<std::size_t>(p.index)].end_s;
    EXPECT_GE(m.send_start_s, producer_end - 1e-12);
    EXPECT_NEAR(m.recv_end_s - m.send_start_s, 1.3, 1e-9);
    arrival[{m.consumer.stage, m.producer.microbatch / s.microbatches}] = m.recv_end_s;
  }
  EXPECT_EQ(arrival.size(), 8u * 2u);
  int checked = 0;
  for (std::size_t d = 0; d < s.devices.size(); ++d) {
    std::map<std::int32_t, std::int32_t> steps;  // per stage: updates so far
    for (std::size_t i = 0; i < s.devices[d].size(); ++i) {
      const Action& u = s.devices[d][i];
      if (u.kind != ActionKind::U) continue;
      const std::int32_t step = steps[u.stage]++;
      EXPECT_GE(r.times[d][i].start_s, arrival.at({u.stage, step}) - 1e-12) << to_string(u);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2 * 8);
  // The exchange alone costs time: with latency 0 and messages between stages of 0 bytes, only
  // the twins' 1000-byte buffers take any (1 s each on the wire); with them 0 bytes too, none.
  CostModel wire = c;
  wire.default_link.latency_s = 0.0;
  CostModel free = wire;
  for (StageCost& st : free.stages) st.gradient_bytes = 0;
  ASSERT_EQ(wire.stages[0].activation_message_bytes, 0);
  const double with = run_summary(s, wire, simulate(s, wire, {false})).timing.makespan_s;
  const double without = run_summary(s, free, simulate(s, free, {false})).timing.makespan_s;
  EXPECT_GE(with - without, 1.0 - 1e-9);
}

}  // namespace
}  // namespace paci
