// paci train --save-every K --save FILE: a run killed with SIGKILL (--kill-at: the process kills
// itself when about to run an action, at seeded random actions of the schedule) resumes with
// --resume FILE from the last complete checkpoint, and its final checkpoint equals the
// uninterrupted run's byte for byte, for every schedule: those whose steps are cuts save at step
// boundaries; PACI, PipeDream and 2BW save a consistent cut with micro-batches in flight, and so
// does a run of a schedule file, whose cuts carry the schedule for --resume.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "exec/cut.hpp"
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
const char* const kDense = " --layers 4 --heads 2 --d-model 16 --seq-len 8 --batch 1 --quiet ";
// The same with a mixture of experts whose capacity drops tokens: a cut's slots hold routes.
const char* const kMoe =
    " --layers 4 --heads 2 --d-model 16 --seq-len 8 --batch 1 --quiet --experts 4 --top-k 2 "
    "--capacity-factor 1.0 ";

std::string flags(const std::string& kind, const char* model = kDense) {
  return "train -k " + kind + " -p 2 -m 2 -n " + std::to_string(kSteps) + model +
         testing::corpus_flags();
}

// Optimizer steps (what a checkpoint counts) per step of --steps: M for PipeDream, else 1.
std::size_t updates_per_step(const std::string& kind) {
  return static_cast<std::size_t>(generate_schedule(kind, 2, 2, 1).steps);
}

// A seeded random action that a run resumed from `state` (none: a fresh run) has still to run,
// among those of a micro-batch of step `from_step` or later of its schedule. A run resumed at a
// step boundary runs a schedule of the steps left; one resumed at a cut, the rest of the cut's
// schedule from each device's position.
std::string random_action(const std::string& kind, const model::TrainingState* state,
                          std::mt19937& rng, std::int32_t from_step = 0) {
  const nlohmann::json* cut =
      state && state->metadata.extra.contains("cut") ? &state->metadata.extra["cut"] : nullptr;
  const std::size_t start =
      cut ? (*cut)["base_step"].get<std::size_t>() : (state ? state->metadata.step : 0);
  const std::size_t per_step = updates_per_step(kind);
  const Schedule s =
      generate_schedule(kind, 2, 2, kSteps - static_cast<std::int32_t>(start / per_step));
  std::vector<std::int64_t> from(s.devices.size(), 0);
  if (cut) from = exec::plan_cut(s, (*cut)["updates"].get<std::int32_t>()).positions;
  std::vector<Action> all;
  for (std::size_t d = 0; d < s.devices.size(); ++d)
    for (std::size_t i = static_cast<std::size_t>(from[d]); i < s.devices[d].size(); ++i) {
      const Action& a = s.devices[d][i];
      if (a.kind != ActionKind::U && a.microbatch / s.microbatches >= from_step) all.push_back(a);
    }
  return to_string(all[std::uniform_int_distribution<std::size_t>(0, all.size() - 1)(rng)]);
}

// The kind, and whether the run reads a schedule file (of that kind, written by paci schedule)
// instead of --kind: a file's run saves cuts carrying the schedule, resumed with --schedule FILE
// (first kill) or --resume alone (second).
// The third: whether the model is a mixture of experts.
class KillAndResume : public ::testing::TestWithParam<std::tuple<std::string, bool, bool>> {};

TEST_P(KillAndResume, FinalStateEqualsTheUninterruptedRunBitwise) {
  const auto [kind, from_file, moe] = GetParam();
  const std::string name = kind + (from_file ? "_file" : "") + (moe ? "_moe" : "");
  const std::string model = moe ? kMoe : kDense;
  std::string run = flags(kind, model.c_str());
  if (from_file) {
    const std::string file = temp_path(name + ".json");
    ASSERT_EQ(
        run_paci("schedule -k " + kind + " -p 2 -m 2 -n " + std::to_string(kSteps) + " -o " + file)
            .status,
        0);
    run = "train --schedule " + file + model + testing::corpus_flags();
  }
  const std::string full = temp_path(name + "_full.state");
  auto r = run_paci(run + " --save " + full);
  ASSERT_EQ(r.status, 0) << r.err;
  std::mt19937 rng(15);
  int resumed_from_a_checkpoint = 0, resumed_at_a_cut = 0;
  const bool steps_are_cuts = kind != "paci" && kind != "pipedream" && kind != "2bw";
  for (int trial = 0; trial < 2; ++trial) {
    const std::string ckpt = temp_path(name + "_ckpt" + std::to_string(trial) + ".state");
    std::filesystem::remove(ckpt);
    // Killed once, then again in the resumed run. The first kill is in step 3 or 4: a device
    // about to run an action of step 3 has updated for step 2, which needed a forward of step 2
    // on every stage, each after its update of step 1; so the checkpoint of step 1 is complete.
    const std::string save = " --save-every 1 --save " + ckpt;
    std::string at = random_action(kind, nullptr, rng, 2);
    r = run_paci(run + save + " --kill-at " + at);
    ASSERT_EQ(r.status, 128 + 9) << "--kill-at " << at << ": " << r.err;
    for (int kill = 0; kill < 2; ++kill) {
      std::string next = run + save;
      std::size_t done = 0;
      std::optional<model::TrainingState> state;
      if (std::filesystem::exists(ckpt)) {
        state = model::load_state(ckpt);
        done = state->metadata.step;
        // The second resume of a file's run names no schedule: the checkpoint carries it.
        if (from_file && kill == 1) next = "train" + model + testing::corpus_flags() + save;
        next += " --resume " + ckpt;
        ++resumed_from_a_checkpoint;
        resumed_at_a_cut += state->metadata.extra.contains("cut");
        if (from_file) {
          EXPECT_TRUE(state->metadata.extra.contains("cut")) << "a file's run saves cuts";
          EXPECT_NO_THROW(state->blob("schedule")) << "a file's cut carries its schedule";
        }
      }
      if (kill == 0 && done + 1 < kSteps * updates_per_step(kind)) {
        at = random_action(kind, state ? &*state : nullptr, rng);
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
  if (steps_are_cuts && !from_file) {
    EXPECT_GE(resumed_from_a_checkpoint, 2);  // every first kill (above)
    EXPECT_EQ(resumed_at_a_cut, 0);
  } else {
    // A device may run an action of step 3 before the others reach their cut after update 1,
    // so a first kill may come before any checkpoint; the seeds give at least one.
    EXPECT_GE(resumed_at_a_cut, 1);
    EXPECT_EQ(resumed_at_a_cut, resumed_from_a_checkpoint);
  }
}

std::string test_name(const ::testing::TestParamInfo<std::tuple<std::string, bool, bool>>& info) {
  std::string name = std::get<0>(info.param);  // no '-' in a test name
  std::replace(name.begin(), name.end(), '-', '_');
  return name + (std::get<1>(info.param) ? "_file" : "") + (std::get<2>(info.param) ? "_moe" : "");
}

INSTANTIATE_TEST_SUITE_P(FlushingSchedules, KillAndResume,
                         ::testing::Combine(::testing::Values("gpipe", "1f1b", "zb-h1", "zb-h2",
                                                              "interleaved"),
                                            ::testing::Values(false), ::testing::Values(false)),
                         test_name);
INSTANTIATE_TEST_SUITE_P(AsynchronousSchedules, KillAndResume,
                         ::testing::Combine(::testing::Values("paci", "pipedream", "2bw"),
                                            ::testing::Values(false), ::testing::Values(false)),
                         test_name);
// A mixture of experts, killed and resumed at steps (1F1B) and at cuts (PACI).
INSTANTIATE_TEST_SUITE_P(MixtureOfExperts, KillAndResume,
                         ::testing::Combine(::testing::Values("1f1b", "paci"),
                                            ::testing::Values(false), ::testing::Values(true)),
                         test_name);
// A schedule file: the asynchronous kinds, and 1F1B (a file's flushed run saves cuts too).
INSTANTIATE_TEST_SUITE_P(ScheduleFiles, KillAndResume,
                         ::testing::Combine(::testing::Values("paci", "pipedream", "2bw", "1f1b"),
                                            ::testing::Values(true), ::testing::Values(false)),
                         test_name);

TEST(SaveEvery, RefusesWhatItCannotCheckpoint) {
  const auto expect_bad = testing::expect_refused;
  const std::string save = " --save-every 1 --save " + temp_path("refused.state");
  expect_bad(flags("1f1b") + " --save-every 1", "--save-every needs --save FILE");
  expect_bad(flags("1f1b") + " --save-every -2 --save x.state",
             "--save-every must be positive (0: off), got -2");
  expect_bad(flags("1f1b") + " --fail-at 0F0 --kill-at 0F0", "cannot be combined");
  EXPECT_FALSE(std::filesystem::exists(temp_path("refused.state")));
}

// A cut carries the schedule file it was taken in: resuming it with another file, or with flags
// that would make another schedule, is refused in one line; so is a --kind run's checkpoint
// resumed with --schedule (nothing in it says which file).
TEST(SaveEvery, ResumeOfAFileNeedsThatSchedule) {
  const auto expect_bad = testing::expect_refused;
  const std::string file = temp_path("resume_of.json"), other = temp_path("resume_other.json");
  ASSERT_EQ(run_paci("schedule -k paci -p 2 -m 2 -n 4 -o " + file).status, 0);
  ASSERT_EQ(run_paci("schedule -k paci -p 2 -m 2 -n 5 -o " + other).status, 0);
  const std::string cut = temp_path("resume_of.state"), kind_ckpt = temp_path("resume_kind.state");
  const std::string data = kDense + testing::corpus_flags();
  auto r = run_paci("train --schedule " + file + data + " --save-every 1 --save " + cut +
                    " --kill-at 1B5");
  ASSERT_EQ(r.status, 128 + 9) << r.err;
  r = run_paci(flags("1f1b") + " --save-every 1 --save " + kind_ckpt + " --kill-at 1B5");
  ASSERT_EQ(r.status, 128 + 9) << r.err;
  expect_bad("train --schedule " + other + data + " --resume " + cut,
             "its cut was taken in the schedule of " + file + ", not in " + other);
  expect_bad("train -k 1f1b" + data + " --resume " + cut,
             "carries the schedule it was cut from (" + file + "); --kind does not apply");
  expect_bad("train --schedule " + file + data + " --resume " + kind_ckpt,
             "was saved by a --kind run: resume it with the same --kind flags");
}

}  // namespace
}  // namespace paci
