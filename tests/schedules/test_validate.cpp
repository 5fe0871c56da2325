// Validation: each kind of broken schedule is rejected with a message naming the problem and the
// actions marked; the deadlock regression (two devices each waiting for the other first).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "schedules/analysis.hpp"
#include "schedules/generators.hpp"
#include "schedules/index.hpp"
#include "schedules/validate.hpp"

namespace paci {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

Schedule make(std::int32_t P, std::int32_t M, std::int32_t N,
              const std::vector<std::vector<std::string>>& rows,
              WeightPolicy policy = WeightPolicy::current) {
  Schedule s;
  s.stages = P;
  s.microbatches = M;
  s.steps = N;
  s.weight_policy = policy;
  for (std::int32_t st = 0; st < P; ++st) s.placement.push_back(st);
  for (const auto& row : rows) {
    s.devices.emplace_back();
    for (const auto& token : row) s.devices.back().push_back(parse_action(token));
  }
  return s;
}

// Runs validate and returns the error, failing the test if it did not throw.
ScheduleError expect_invalid(const Schedule& s) {
  try {
    validate(s);
  } catch (const ScheduleError& e) {
    return e;
  }
  ADD_FAILURE() << "schedule was accepted";
  return ScheduleError("", {});
}

TEST(Validate, AcceptsHandWrittenOneFOneB) {
  const Schedule s =
      make(2, 2, 1, {{"0F0", "0F1", "0B0", "0B1", "0U"}, {"1F0", "1B0", "1F1", "1B1", "1U"}});
  const ValidationSummary summary = validate(s);
  EXPECT_EQ(summary.actions, 10);
  // Device order: 4 + 4 edges; data: 1F0,1F1 (activation), 1B0,1B1,0B0,0B1 (local), 0B0,0B1
  // (gradient).
  EXPECT_EQ(summary.dependency_edges, 8 + 2 + 4 + 2);
}

// The shape of PyTorch issue 172668, as our own file: device 0 waits for the gradient of
// micro-batch 0 before sending micro-batch 1's activation, while device 1 waits for micro-batch
// 1's activation before doing micro-batch 0.
TEST(Validate, DeadlockTwoDevicesEachWaitingForTheOther) {
  const Schedule s =
      make(2, 2, 1, {{"0F0", "0B0", "0F1", "0B1", "0U"}, {"1F1", "1B1", "1F0", "1B0", "1U"}});
  const ScheduleError e = expect_invalid(s);
  EXPECT_THAT(e.what(), HasSubstr("deadlock"));
  // Every action on the cycle is marked: 0B0 -> 0F1 -> 1F1 -> 1B1 -> 1F0 -> 1B0 -> 0B0.
  std::vector<std::string> marked;
  for (const ActionPos& p : e.marked)
    marked.push_back(to_string(
        s.devices[static_cast<std::size_t>(p.device)][static_cast<std::size_t>(p.index)]));
  std::sort(marked.begin(), marked.end());
  EXPECT_EQ(marked, (std::vector<std::string>{"0B0", "0F1", "1B0", "1B1", "1F0", "1F1"}));
  const std::string grid = render_grid(s, e.marked);
  EXPECT_THAT(grid, HasSubstr(">0B0<"));
  EXPECT_THAT(grid, HasSubstr(">1F1<"));
  EXPECT_THAT(grid, HasSubstr("^^^"));
  EXPECT_THAT(grid, Not(HasSubstr(">0F0<")));
}

TEST(Validate, BackwardBeforeItsOwnForwardIsADeadlock) {
  const Schedule s = make(1, 1, 1, {{"0B0", "0F0", "0U"}});
  EXPECT_THAT(expect_invalid(s).what(), HasSubstr("deadlock"));
}

TEST(Validate, MissingBackward) {
  const Schedule s = make(2, 1, 1, {{"0F0", "0U"}, {"1F0", "1B0", "1U"}});
  const ScheduleError e = expect_invalid(s);
  EXPECT_THAT(e.what(), HasSubstr("0B0 is missing"));
  ASSERT_EQ(e.marked.size(), 1u);
  EXPECT_EQ(e.marked[0], (ActionPos{0, 0}));
}

TEST(Validate, MissingForward) {
  const Schedule s = make(1, 2, 1, {{"0F0", "0B0", "0B1", "0U"}});
  EXPECT_THAT(expect_invalid(s).what(), HasSubstr("never runs the forward 0F1"));
}

TEST(Validate, DuplicatedAction) {
  const Schedule s = make(1, 1, 1, {{"0F0", "0F0", "0B0", "0U"}});
  const ScheduleError e = expect_invalid(s);
  EXPECT_THAT(e.what(), HasSubstr("0F0 appears twice"));
  EXPECT_EQ(e.marked.size(), 2u);
}

TEST(Validate, StageOutOfRange) {
  const Schedule s = make(1, 1, 1, {{"0F0", "3B0", "0U"}});
  EXPECT_THAT(expect_invalid(s).what(), HasSubstr("stage 3 out of range"));
}

TEST(Validate, MicrobatchOutOfRange) {
  const Schedule s = make(1, 1, 1, {{"0F0", "0B0", "0F1", "0U"}});
  EXPECT_THAT(expect_invalid(s).what(), HasSubstr("micro-batch 1 out of range"));
}

// Found by the fuzzer (tests/fuzz/regressions/schedule_csv): one action whose micro-batch index is
// 777777077 made a CSV claim that many micro-batches, and validate() sized its table by the claim
// (12 GB). Now the claim is checked against the actions first.
TEST(Validate, MoreMicrobatchesThanActionsIsRefusedBeforeAllocating) {
  const Schedule s = make(1, 777777078, 1, {{"0F777777077"}});
  const ScheduleError e = expect_invalid(s);
  EXPECT_THAT(e.what(), HasSubstr("incomplete: 777777078 micro-batches"));
  EXPECT_THAT(e.what(), HasSubstr("more than the 1 actions"));
  // Within the metadata's limits but far past the actions, on several stages: the same refusal.
  EXPECT_THAT(expect_invalid(make(2, 1 << 29, 2, {{"0F0"}, {"1F0"}})).what(),
              HasSubstr("incomplete: 1073741824 micro-batches"));
}

// Which schedules' optimizer steps are cuts of the pipeline (paci train --save-every needs one).
TEST(StepCut, FlushingSchedulesAreCutsAndTheAsynchronousOnesAreNot) {
  for (const char* kind : {"gpipe", "1f1b", "zb-h1", "zb-h2", "interleaved"})
    EXPECT_EQ(step_cut_violation(generate_schedule(kind, 4, 8, 3)), std::nullopt) << kind;
  for (const char* kind : {"paci", "pipedream", "2bw"}) {
    const auto why = step_cut_violation(generate_schedule(kind, 4, 8, 3));
    ASSERT_TRUE(why.has_value()) << kind;
    EXPECT_THAT(*why, HasSubstr("before its update of step 0")) << kind;
  }
  // A stage running a step's backward after that step's update.
  EXPECT_EQ(step_cut_violation(make(1, 1, 2, {{"0F0", "0U", "0B0", "0F1", "0B1", "0U"}})),
            "stage 0 runs 0B0 (step 0) after its update of that step");
}

TEST(Validate, ActionOnTheWrongDevice) {
  const Schedule s = make(2, 1, 1, {{"0F0", "1F0", "0B0", "0U"}, {"1B0", "1U"}});
  EXPECT_THAT(expect_invalid(s).what(), HasSubstr("stage 1 is placed on device 1"));
}

TEST(Validate, UpdateAfterTheWrongNumberOfBackwards) {
  const Schedule s = make(1, 2, 1, {{"0F0", "0B0", "0U", "0F1", "0B1"}});
  const ScheduleError e = expect_invalid(s);
  EXPECT_THAT(e.what(), HasSubstr("follows 1 backwards"));
  EXPECT_EQ(e.marked, (std::vector<ActionPos>{{0, 2}}));
}

TEST(Validate, MissingUpdate) {
  const Schedule s = make(1, 1, 2, {{"0F0", "0B0", "0U", "0F1", "0B1"}});
  EXPECT_THAT(expect_invalid(s).what(), HasSubstr("has 1 optimizer steps"));
}

TEST(Validate, SplitBackwardNeedsBothHalves) {
  const Schedule ok = make(2, 1, 1, {{"0F0", "0I0", "0W0", "0U"}, {"1F0", "1I0", "1W0", "1U"}});
  EXPECT_NO_THROW(validate(ok));
  const Schedule no_w = make(1, 1, 1, {{"0F0", "0I0", "0U"}});
  EXPECT_THAT(expect_invalid(no_w).what(), HasSubstr("0W0 is missing"));
  const Schedule w_only = make(1, 1, 1, {{"0F0", "0B0", "0W0", "0U"}});
  EXPECT_THAT(expect_invalid(w_only).what(), HasSubstr("a W needs its I"));
  // DualPipe's stages mix full and split backwards, one micro-batch's each way ...
  const Schedule mixed = make(1, 2, 1, {{"0F0", "0I0", "0W0", "0F1", "0B1", "0U"}});
  EXPECT_NO_THROW(validate(mixed));
  // ... but not both for one micro-batch.
  const Schedule both = make(1, 1, 1, {{"0F0", "0I0", "0W0", "0B0", "0U"}});
  EXPECT_THAT(expect_invalid(both).what(), HasSubstr("micro-batch 0's backward into I and W, but "
                                                     "also has 0B0"));
}

TEST(Validate, DoubleBufferAllowsTwoVersions) {
  Schedule s = generate_schedule("paci", 4, 2, 3);  // stage 0 needs 3 versions under stash
  s.weight_policy = WeightPolicy::double_buffer;
  EXPECT_THAT(expect_invalid(s).what(), HasSubstr("double_buffer allows 2"));
  s.weight_policy = WeightPolicy::stash;
  EXPECT_NO_THROW(validate(s));
  EXPECT_EQ(analyze(s).stages[0].peak_weight_versions, 3);
}

TEST(Validate, BadMetadata) {
  Schedule s = make(1, 1, 1, {{"0F0", "0B0", "0U"}});
  s.steps = 0;
  EXPECT_THROW(validate(s), InputError);
  s.steps = 1;
  s.placement = {1};
  EXPECT_THROW(validate(s), InputError);
}

TEST(Validate, GridWindowsLongSchedules) {
  const Schedule s = generate_schedule("1f1b", 2, 40, 1);
  const std::string grid = render_grid(s, {{0, 50}});
  EXPECT_THAT(grid, HasSubstr(">" + to_string(s.devices[0][50]) + "<"));
  EXPECT_THAT(grid, HasSubstr("..."));
  EXPECT_THAT(grid, Not(HasSubstr(" 0F0 ")));
}

}  // namespace
}  // namespace paci
