// Cuts of a run (exec/cut.hpp): the planned positions leave no orphan message and name exactly
// the messages crossing them, and a run resumed at any cut of any schedule — PACI, PipeDream and
// 2BW with micro-batches in flight included — ends with bitwise the weights, AdamW state and
// losses of the uninterrupted run, threaded or replayed in one thread. Taking cuts does not
// change the run.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "exec/cut.hpp"
#include "exec/executor.hpp"
#include "exec/partition.hpp"
#include "schedules/consumers.hpp"
#include "schedules/dependencies.hpp"
#include "schedules/formats.hpp"
#include "schedules/generators.hpp"
#include "schedules/index.hpp"
#include "schedules/validate.hpp"
#include "synthetic.hpp"

namespace paci::exec {
namespace {

const std::vector<std::string> kKinds = {"paci",  "pipedream", "2bw",         "1f1b", "gpipe",
                                         "zb-h1", "zb-h2",     "interleaved", "zb-v", "dualpipev"};

Schedule make(const std::string& kind, std::int32_t P, std::int32_t M, std::int32_t N) {
  return generate_schedule(kind, P, M, N, kind == "interleaved" ? 2 : 0);
}

TEST(CutPlan, NoOrphanAndExactlyTheCrossingMessages) {
  for (const std::string& kind : kKinds)
    for (std::int32_t P : {2, 3, 4})
      for (std::int32_t M : {1, 3, 4}) {
        Schedule s;
        try {
          s = make(kind, P, M, 4);
        } catch (const InputError&) {
          continue;  // a configuration the kind does not have (2BW: M >= P, interleaved: P | M,
                     // dualpipev: M >= 2P)
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
    f.weights.push_back(rt.params());
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

void expect_same(const CutImage& a, const CutImage& b) {
  EXPECT_EQ(a.plan.updates, b.plan.updates);
  EXPECT_EQ(a.plan.positions, b.plan.positions);
  EXPECT_EQ(a.plan.messages, b.plan.messages);
  EXPECT_EQ(a.plan.digest, b.plan.digest);
  EXPECT_EQ(a.runtime, b.runtime);
  EXPECT_EQ(a.messages, b.messages);
  EXPECT_EQ(a.losses, b.losses);
  ASSERT_EQ(a.stages.size(), b.stages.size());
  for (std::size_t s = 0; s < a.stages.size(); ++s) {
    EXPECT_EQ(a.stages[s].weights, b.stages[s].weights);
    EXPECT_EQ(a.stages[s].first_moment, b.stages[s].first_moment);
    EXPECT_EQ(a.stages[s].second_moment, b.stages[s].second_moment);
    EXPECT_EQ(a.stages[s].optimizer_steps, b.stages[s].optimizer_steps);
  }
}

// Takes every cut of `s` (cut_every 1), then resumes at each and checks that the run ends as the
// uninterrupted one and takes the same later cuts.
void resume_at_every_cut(const Schedule& s, bool sequential) {
  ExecConfig plain = config_for(s);
  plain.sequential = sequential;
  Executor reference(s, plain);
  const ExecResult ref_run = reference.run();
  const Final expected = final_state(reference, s, ref_run);
  ExecConfig taking = plain;
  std::vector<std::shared_ptr<CutImage>> images;
  taking.cut_every = 1;
  taking.on_cut = [&](const CutImage& image, std::size_t steps) {
    EXPECT_EQ(steps, static_cast<std::size_t>(image.plan.updates));
    images.push_back(std::make_shared<CutImage>(image));
  };
  Executor with_cuts(s, taking);
  const ExecResult cut_run = with_cuts.run();
  expect_bitwise(final_state(with_cuts, s, cut_run), expected);  // taking cuts changes nothing
  ASSERT_EQ(images.size(), static_cast<std::size_t>(s.steps - 1));
  for (std::size_t i = 0; i < images.size(); ++i) {
    SCOPED_TRACE(fmt::format("resumed at the cut after update {}", images[i]->plan.updates));
    EXPECT_EQ(images[i]->plan.updates, static_cast<std::int32_t>(i) + 1);
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
    ASSERT_EQ(later.size(), images.size() - i - 1);
    for (std::size_t k = 0; k < later.size(); ++k) expect_same(*later[k], *images[i + 1 + k]);
  }
}

// Stage 0 runs three forwards before its first update: the activation 0F2 -> 1F2 is in transit
// across the cuts after updates 1 and 2, and must be carried from one to the next (and from a
// resumed cut into the next one it takes).
TEST(CutResume, AMessageInTransitAcrossTwoCuts) {
  const Schedule s = parse_schedule(
      "# paci.schedule/1 kind=custom stages=2 microbatches=1 steps=4 weight_policy=current "
      "placement=0,1\n"
      "0F0 0F1 0F2 0B0 0U 0B1 0U 0B2 0U 0F3 0B3 0U\n"
      "1F0 1B0 1U 1F1 1B1 1U 1F2 1B2 1U 1F3 1B3 1U\n",
      ScheduleFormat::text, "two_cuts.txt");
  ASSERT_NO_THROW(validate(s));
  const CutPlan first = plan_cut(s, 1), second = plan_cut(s, 2);
  const CutMessage m{{DependencyKind::activation, 0, 2}, 0, 1, 2};
  EXPECT_NE(std::find(first.messages.begin(), first.messages.end(), m), first.messages.end());
  EXPECT_NE(std::find(second.messages.begin(), second.messages.end(), m), second.messages.end());
  for (const bool sequential : {false, true}) resume_at_every_cut(s, sequential);
}

class CutResume : public ::testing::TestWithParam<std::string> {};

TEST_P(CutResume, EveryCutResumesBitwise) {
  const std::string kind = GetParam();
  for (const bool sequential : {false, true}) {
    SCOPED_TRACE(fmt::format("{}{}", kind, sequential ? " sequential" : " threaded"));
    // 3 stages, or 2 devices of 2 (interleaved, zb-v, dualpipev): at most the tiny model's 4
    // blocks
    resume_at_every_cut(make(kind, kind == "interleaved" || v_shaped(kind) ? 2 : 3, 4, 5),
                        sequential);
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, CutResume, ::testing::ValuesIn(kKinds), [](const auto& info) {
  std::string name = info.param;
  std::erase(name, '-');
  return name;
});

// The last cut a run of `s` takes with cut_every `every`.
std::shared_ptr<CutImage> last_cut(const Schedule& s, std::int32_t every) {
  ExecConfig c = config_for(s);
  std::shared_ptr<CutImage> image;
  c.cut_every = every;
  c.on_cut = [&](const CutImage& i, std::size_t) { image = std::make_shared<CutImage>(i); };
  Executor(s, c).run();
  return image;
}

// An executor of `s` under `c` resuming at `image` is refused with a line holding `what`
// (an InputError).
void expect_refused(const Schedule& s, ExecConfig c, std::shared_ptr<CutImage> image,
                    const std::string& what) {
  c.resume_from = std::move(image);
  try {
    Executor(s, c);
    ADD_FAILURE() << "not refused: " << what;
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

TEST(CutResume, RefusesACutOfAnotherScheduleOrPartition) {
  const Schedule s = make("paci", 3, 4, 4);
  const auto image = last_cut(s, 2);
  ASSERT_TRUE(image);
  const Schedule other = make("paci", 3, 3, 4);
  expect_refused(other, config_for(other), image, "another schedule");
  auto bad = std::make_shared<CutImage>(*image);
  bad->runtime[1].pop_back();
  expect_refused(s, config_for(s), bad, "this stage's runtime has");
  ExecConfig repartitioned = config_for(s);  // another partition of the same model
  repartitioned.ranges = {{0, 1}, {1, 1}, {2, 2}};
  ASSERT_NE(repartitioned.ranges, config_for(s).ranges);
  expect_refused(s, repartitioned, image, "another partition");
}

// A crafted image: sizes right, CRC right (it never was in a file), but a version the stage
// cannot have at the cut. Refused before anything runs.
TEST(CutResume, RefusesBookkeepingTheCutCannotHave) {
  const Schedule s = make("2bw", 3, 4, 4);
  const auto image = last_cut(s, 2);
  ASSERT_TRUE(image);
  const std::size_t book = image->stages[0].weights.size() * sizeof(float);  // after the grads
  for (const std::int32_t version : {0, 1, 3}) {  // the stage is at version 2 of 4
    auto bad = std::make_shared<CutImage>(*image);
    std::memcpy(bad->runtime[0].data() + book, &version, sizeof version);
    expect_refused(s, config_for(s), bad, "weight versions are not those");
  }
  std::int32_t version = 0;
  std::memcpy(&version, image->runtime[0].data() + book, sizeof version);
  EXPECT_EQ(version, 2);
}

}  // namespace
}  // namespace paci::exec
