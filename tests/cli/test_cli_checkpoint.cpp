// paci train --save-every K --save FILE: a run killed with SIGKILL (--kill-at: the process kills
// itself when about to run an action, at seeded random actions of the schedule) resumes with
// --resume FILE from the last complete checkpoint (at least the one before the killed step's),
// and its final checkpoint equals the uninterrupted run's byte for byte, for every schedule whose
// steps are cuts; the others are refused in one line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "model/checkpoint_state.hpp"
#include "schedules/generators.hpp"
#include "tests/cli/run.hpp"

namespace paci {
namespace {

using ::testing::HasSubstr;
using testing::run_paci;
using testing::slurp;
using testing::temp_path;

constexpr std::int32_t kSteps = 4;
// Small, so that the CLI runs stay short under the sanitizers (4 blocks: interleaved's 4 stages).
const char* const kModel = " --layers 4 --heads 2 --d-model 16 --seq-len 8 --batch 1 --quiet ";

std::string flags(const std::string& kind) {
  return "train -k " + kind + " -p 2 -m 2 -n " + std::to_string(kSteps) + kModel +
         testing::corpus_flags();
}

// A seeded random action of the schedule that runs the steps left after `done`, among those of
// a micro-batch of step `from_step` or later (of that schedule).
std::string random_action(const std::string& kind, std::size_t done, std::mt19937& rng,
                          std::int32_t from_step = 0) {
  const Schedule s = generate_schedule(kind, 2, 2, kSteps - static_cast<std::int32_t>(done));
  std::vector<Action> all;
  for (const auto& list : s.devices)
    for (const Action& a : list)
      if (a.kind != ActionKind::U && a.microbatch / s.microbatches >= from_step) all.push_back(a);
  return to_string(all[std::uniform_int_distribution<std::size_t>(0, all.size() - 1)(rng)]);
}

class KillAndResume : public ::testing::TestWithParam<std::string> {};

TEST_P(KillAndResume, FinalStateEqualsTheUninterruptedRunBitwise) {
  const std::string kind = GetParam();
  const std::string full = temp_path(kind + "_full.state");
  auto r = run_paci(flags(kind) + " --save " + full);
  ASSERT_EQ(r.status, 0) << r.err;
  std::mt19937 rng(15);
  int resumed_from_a_checkpoint = 0;
  for (int trial = 0; trial < 2; ++trial) {
    const std::string ckpt = temp_path(kind + "_ckpt" + std::to_string(trial) + ".state");
    std::filesystem::remove(ckpt);
    // Killed once, then again in the resumed run. The first kill is in step 3 or 4: a device
    // about to run an action of step 3 has updated for step 2, which needed a forward of step 2
    // on every stage, each after its update of step 1; so the checkpoint of step 1 is complete.
    const std::string save = " --save-every 1 --save " + ckpt;
    std::string at = random_action(kind, 0, rng, 2);
    r = run_paci(flags(kind) + save + " --kill-at " + at);
    ASSERT_EQ(r.status, 128 + 9) << "--kill-at " << at << ": " << r.err;
    for (int kill = 0; kill < 2; ++kill) {
      std::string next = flags(kind) + save;
      std::size_t done = 0;
      if (std::filesystem::exists(ckpt)) {
        done = model::load_state(ckpt).metadata.step;
        next += " --resume " + ckpt;
        ++resumed_from_a_checkpoint;
      }
      if (kill == 0 && done + 1 < kSteps) {
        at = random_action(kind, done, rng);
        r = run_paci(next + " --kill-at " + at);
        ASSERT_EQ(r.status, 128 + 9) << "--kill-at " << at << ": " << r.err;
        continue;
      }
      r = run_paci(next);
      ASSERT_EQ(r.status, 0) << r.err;
      break;
    }
    EXPECT_EQ(slurp(ckpt), slurp(full)) << kind << ", trial " << trial;
    // Nothing half-written next to it: every save completed before the next action ran.
    for (const auto& entry : std::filesystem::directory_iterator(::testing::TempDir()))
      EXPECT_EQ(entry.path().string().find(ckpt + "."), std::string::npos) << entry.path();
  }
  EXPECT_GE(resumed_from_a_checkpoint, 2);  // every first kill (above)
}

INSTANTIATE_TEST_SUITE_P(FlushingSchedules, KillAndResume,
                         ::testing::Values("gpipe", "1f1b", "zb-h1", "zb-h2", "interleaved"),
                         [](const auto& info) {
                           std::string name = info.param;  // no '-' in a test name
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(SaveEvery, RefusesWhatItCannotCheckpoint) {
  const auto expect_bad = testing::expect_refused;
  const std::string save = " --save-every 1 --save " + temp_path("refused.state");
  for (const std::string kind : {"paci", "pipedream", "2bw"})
    expect_bad(flags(kind) + save, kind + " is not: stage 0 runs 0F");
  expect_bad(flags("1f1b") + " --save-every 1", "--save-every needs --save FILE");
  expect_bad(flags("1f1b") + " --save-every -2 --save x.state",
             "--save-every must be positive (0: off), got -2");
  expect_bad(flags("1f1b") + " --fail-at 0F0 --kill-at 0F0", "cannot be combined");
  EXPECT_FALSE(std::filesystem::exists(temp_path("refused.state")));
}

}  // namespace
}  // namespace paci
