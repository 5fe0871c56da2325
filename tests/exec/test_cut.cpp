// Cuts of a run (exec/cut.hpp): the planned positions leave no orphan message and name exactly
// the messages crossing them, and a run resumed at any cut of any schedule — PACI, PipeDream and
// 2BW with micro-batches in flight included — ends with bitwise the weights, AdamW state and
// losses of the uninterrupted run, threaded or replayed in one thread. Taking cuts does not
// change the run.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "exec/cut.hpp"
#include "exec/executor.hpp"
#include "exec/partition.hpp"
#include "schedules/consumers.hpp"
#include "schedules/dependencies.hpp"
#include "schedules/generators.hpp"
#include "schedules/index.hpp"
#include "synthetic.hpp"

namespace paci::exec {
namespace {

const std::vector<std::string> kKinds = {"paci",  "pipedream", "2bw",   "1f1b",
                                         "gpipe", "zb-h1",     "zb-h2", "interleaved"};

Schedule make(const std::string& kind, std::int32_t P, std::int32_t M, std::int32_t N) {
  return generate_schedule(kind, P, M, N, kind == "interleaved" ? 2 : 1);
}

TEST(CutPlan, NoOrphanAndExactlyTheCrossingMessages) {
  for (const std::string& kind : kKinds)
    for (std::int32_t P : {2, 3, 4})
      for (std::int32_t M : {1, 3, 4}) {
        Schedule s;
        try {
          s = make(kind, P, M, 4);
        } catch (const InputError&) {
          continue;  // a configuration the kind does not have (2BW: M >= P, interleaved: P | M)
        }
        const ActionIndex index(s);
        const DependencyRules rules(s);
        const ConsumerIndex consumers(s, index, rules);
        for (std::int32_t u = 1; u < s.steps; ++u) {
          SCOPED_TRACE(fmt::format("{} P={} M={} after update {}", kind, P, M, u));
          const CutPlan plan = plan_cut(s, u);
          ASSERT_EQ(plan.positions.size(), s.devices.size());
          std::size_t crossing = 0;
          for (std::int64_t v = 0; v < index.size(); ++v) {
            const ActionPos from = index.position(v);
            for (const Consumer& c : consumers.of(v)) {
              if (c.kind == DependencyKind::local) continue;
              const ActionPos to = index.position(c.vertex);
              const bool sent = from.index < plan.positions[static_cast<std::size_t>(from.device)];
              const bool received = to.index < plan.positions[static_cast<std::size_t>(to.device)];
              EXPECT_FALSE(received && !sent) << "orphan message into device " << to.device;
              if (sent && !received) {
                ++crossing;
                const Action& a = s.devices[static_cast<std::size_t>(from.device)]
                                           [static_cast<std::size_t>(from.index)];
                const CutMessage m{
                    {c.kind, a.stage, a.microbatch}, from.device, to.device, from.index};
                EXPECT_NE(std::find(plan.messages.begin(), plan.messages.end(), m),
                          plan.messages.end());
              }
            }
          }
          EXPECT_EQ(plan.messages.size(), crossing);
          // Each device stops at or before its stages' u-th update, and has actions left.
          for (std::size_t d = 0; d < s.devices.size(); ++d) {
            std::int32_t updates = 0;
            for (std::int64_t i = 0; i < plan.positions[d]; ++i)
              updates += s.devices[d][static_cast<std::size_t>(i)].kind == ActionKind::U;
            EXPECT_LE(updates, u * static_cast<std::int32_t>(s.stages / s.num_devices()));
            EXPECT_LT(plan.positions[d], static_cast<std::int64_t>(s.devices[d].size()));
          }
        }
      }
}

TEST(CutPlan, PaciCutFollowsEachUpdateAndCarriesItsInFlightMessages) {
  // 0F0 0F1 0F2 0B0 0F3 0B1 0F4 0B2 0F5 0B3 0U | 0F6 ...: device 0 has sent 0F5 (and 1 has
  // sent 1F4) to devices that run them after their cuts.
  const CutPlan plan = plan_cut(make("paci", 3, 4, 3), 1);
  EXPECT_EQ(plan.positions, (std::vector<std::int64_t>{11, 10, 9}));
  ASSERT_EQ(plan.messages.size(), 2u);
  EXPECT_EQ(plan.messages[0], (CutMessage{{DependencyKind::activation, 0, 5}, 0, 1, 8}));
  EXPECT_EQ(plan.messages[1], (CutMessage{{DependencyKind::activation, 1, 4}, 1, 2, 7}));
  EXPECT_THROW(plan_cut(make("paci", 3, 4, 3), 3), InputError);
  EXPECT_THROW(plan_cut(make("paci", 3, 4, 3), 0), InputError);
}

ExecConfig config_for(const Schedule& s) {
  ExecConfig c;
  c.config.layers = 4;
  c.config.heads = 2;
  c.config.d_model = 16;
  c.config.max_seq_len = 8;
  c.config.vocab = 64;
  c.batch = 2;
  c.seq_len = 8;
  c.ranges = balanced_partition(c.config, static_cast<std::size_t>(s.stages), c.batch, c.seq_len);
  c.lr.max_lr = 1e-2;
  c.lr.min_lr = 1e-3;
  c.lr.warmup_steps = 1;
  c.clip = 1.0;
  c.seed = 11;
  c.data = testing::synthetic;
  c.snapshot_every = 2;
  return c;
}

struct Final {
  std::vector<std::vector<float>> weights, m, v, snapshots;
  std::vector<std::size_t> steps;
  std::vector<float> losses;
};

Final final_state(Executor& ex, const Schedule& s, const ExecResult& r) {
  Final f;
  for (std::int32_t st = 0; st < s.stages; ++st) {
    const StageRuntime& rt = ex.stage(st);
    f.weights.emplace_back(rt.params().begin(), rt.params().end());
    f.m.emplace_back(rt.optimizer().first_moment().begin(), rt.optimizer().first_moment().end());
    f.v.emplace_back(rt.optimizer().second_moment().begin(), rt.optimizer().second_moment().end());
    f.steps.push_back(rt.optimizer().steps());
    for (std::size_t i = 0; i < rt.snapshots(); ++i)
      f.snapshots.emplace_back(rt.snapshot(i).begin(), rt.snapshot(i).end());
  }
  f.losses = r.microbatch_losses;
  return f;
}

void expect_bitwise(const Final& a, const Final& b) {
  EXPECT_EQ(a.weights, b.weights);  // float vectors compare elementwise: bitwise for non-NaN
  EXPECT_EQ(a.m, b.m);
  EXPECT_EQ(a.v, b.v);
  EXPECT_EQ(a.steps, b.steps);
  EXPECT_EQ(a.snapshots, b.snapshots);
  EXPECT_EQ(a.losses, b.losses);
}

class CutResume : public ::testing::TestWithParam<std::string> {};

TEST_P(CutResume, EveryCutResumesBitwise) {
  const std::string kind = GetParam();
  for (const bool sequential : {false, true}) {
    const Schedule s = make(kind, kind == "interleaved" ? 2 : 3, 4, 5);  // 4 stages at most
    SCOPED_TRACE(fmt::format("{}{}", kind, sequential ? " sequential" : " threaded"));
    ExecConfig plain = config_for(s);
    plain.sequential = sequential;
    Executor reference(s, plain);
    const ExecResult ref_run = reference.run();
    const Final expected = final_state(reference, s, ref_run);

    ExecConfig taking = plain;
    std::vector<std::shared_ptr<CutImage>> images;
    std::vector<std::size_t> steps_done;
    taking.cut_every = 1;
    taking.on_cut = [&](const CutImage& image, std::size_t steps) {
      auto copy = std::make_shared<CutImage>(image);
      copy->messages.resize(image.plan.messages.size());
      images.push_back(copy);
      steps_done.push_back(steps);
    };
    Executor with_cuts(s, taking);
    const ExecResult cut_run = with_cuts.run();
    expect_bitwise(final_state(with_cuts, s, cut_run), expected);  // taking cuts changes nothing
    ASSERT_EQ(images.size(), static_cast<std::size_t>(s.steps - 1));
    for (std::size_t i = 0; i < images.size(); ++i) {
      SCOPED_TRACE(fmt::format("resumed at the cut after update {}", images[i]->plan.updates));
      EXPECT_EQ(images[i]->plan.updates, static_cast<std::int32_t>(i) + 1);
      EXPECT_EQ(steps_done[i], i + 1);
      ExecConfig resumed = plain;
      resumed.resume_from = images[i];
      resumed.cut_every = 1;  // and it takes the later cuts as the first run did
      std::vector<std::shared_ptr<CutImage>> later;
      resumed.on_cut = [&](const CutImage& image, std::size_t) {
        later.push_back(std::make_shared<CutImage>(image));
      };
      Executor again(s, resumed);
      const ExecResult run = again.run();
      expect_bitwise(final_state(again, s, run), expected);
      EXPECT_EQ(later.size(), images.size() - i - 1);
      if (!later.empty()) {
        EXPECT_EQ(later.front()->runtime, images[i + 1]->runtime);
        EXPECT_EQ(later.front()->plan.positions, images[i + 1]->plan.positions);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, CutResume, ::testing::ValuesIn(kKinds), [](const auto& info) {
  std::string name = info.param;
  std::erase(name, '-');
  return name;
});

TEST(CutResume, RefusesACutOfAnotherScheduleOrPartition) {
  const Schedule s = make("paci", 3, 4, 4);
  ExecConfig c = config_for(s);
  std::shared_ptr<CutImage> image;
  c.cut_every = 2;
  c.on_cut = [&](const CutImage& i, std::size_t) { image = std::make_shared<CutImage>(i); };
  Executor(s, c).run();
  ASSERT_TRUE(image);
  ExecConfig other = config_for(make("paci", 3, 3, 4));
  other.resume_from = image;
  try {
    Executor(make("paci", 3, 3, 4), other);
    ADD_FAILURE() << "resumed another schedule";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("another schedule"), std::string::npos) << e.what();
  }
  auto bad = std::make_shared<CutImage>(*image);
  bad->runtime[1].pop_back();
  ExecConfig truncated = config_for(s);
  truncated.resume_from = bad;
  EXPECT_THROW(Executor(s, truncated), model::InputError);
}

}  // namespace
}  // namespace paci::exec
