// PyTorch pipelining's CSV (finding 1: the -o DIR CSV had paci's header and U cells, which
// PyTorch's loader refuses; asynchronous kinds loaded and ran as gradient accumulation), 1F1B
// with fewer micro-batches than stages (finding 8), and the search that keeps to what a tool
// runs. tests/interop/check_pytorch.py runs the same CSVs in PyTorch's runtime.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/errors.hpp"
#include "interop/pytorch.hpp"
#include "interop/tool.hpp"
#include "plan/search/search.hpp"
#include "schedules/formats.hpp"
#include "schedules/generators.hpp"
#include "tests/interop/plans.hpp"

namespace paci::interop {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(InteropPytorch, CsvHasPytorchsGrammarOnly) {
  for (const char* kind : {"gpipe", "1f1b", "zb-h1", "zb-h2", "interleaved", "zb-v"}) {
    const Schedule s = generate_schedule(kind, 4, 8, 1, 0);
    const std::string csv = write_schedule(s, ScheduleFormat::pytorch);
    EXPECT_THAT(csv, Not(HasSubstr("#"))) << kind;
    EXPECT_THAT(csv, Not(HasSubstr("U"))) << kind;
    EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 4) << kind;  // a row per rank
    // Read back as PyTorch's compute-only CSV: the same compute, and one U per stage appended.
    const Schedule back = parse_schedule(csv, ScheduleFormat::pytorch, "x.csv");
    EXPECT_EQ(back.stages, s.stages) << kind;
    EXPECT_EQ(back.placement, s.placement) << kind;
    EXPECT_EQ(back.num_actions(), s.num_actions()) << kind;
  }
  EXPECT_EQ(write_schedule(generate_schedule("1f1b", 2, 2, 1, 0), ScheduleFormat::pytorch),
            "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
}

TEST(InteropPytorch, AsynchronousSchedulesAreRefusedSayingWhy) {
  for (const char* kind : {"paci", "pipedream", "2bw"}) {
    const Schedule s = generate_schedule(kind, 4, 4, 3, 0);
    EXPECT_THROW(write_schedule(s, ScheduleFormat::pytorch), InputError) << kind;
    EXPECT_FALSE(pytorch_refusal(s).empty()) << kind;
    const plan::PlanResult p = test::plan_of("llama3-8b", kind, 8, 1, 4);
    EXPECT_THAT(refusal(Tool::pytorch, p.config), HasSubstr("gradient accumulation")) << kind;
    EXPECT_THROW(emit(Tool::pytorch, p), InputError) << kind;
  }
  // One step with the optimizer at the end is what PyTorch runs.
  EXPECT_EQ(pytorch_refusal(generate_schedule("1f1b", 4, 4, 1, 0)), "");
  // Its runtime places stages looped or V-shaped (ZB-V); any other placement is refused.
  EXPECT_EQ(pytorch_refusal(generate_schedule("zb-v", 4, 8, 1, 0)), "");
  Schedule odd = generate_schedule("zb-v", 4, 8, 1, 0);
  std::swap(odd.placement[4], odd.placement[5]);  // stages 4 and 5 on devices 2 and 3
  EXPECT_THAT(pytorch_refusal(odd), HasSubstr("neither looped"));
}

TEST(InteropPytorch, OneFOneBWithFewerMicrobatchesThanStagesIsRefused) {
  plan::PlanConfig c = test::plan_of("llama3-8b", "1f1b", 8, 1, 8).config;
  c.global_batch = 4;  // d = 1, b = 1: M = 4 < p = 8
  EXPECT_THAT(refusal(Tool::pytorch, c), HasSubstr("--kind gpipe"));
  EXPECT_THAT(refusal(Tool::torchtitan, c), Not(testing::IsEmpty()));
  c.global_batch = 8;
  EXPECT_EQ(refusal(Tool::pytorch, c), "");
}

plan::SearchSpace small_space() {
  plan::SearchSpace s;
  s.model = plan::model_preset("llama3-8b");
  s.cluster = plan::cluster_preset("h100-80gb");
  s.gpus = 8;
  s.global_batch = 8;
  return s;
}

// --emit TOOL: the search keeps to plans the tool runs, and says how many it left out.
TEST(InteropPytorch, SearchKeepsToWhatTheToolRuns) {
  plan::SearchOptions o;
  o.jobs = 1;
  o.runnable = [](const plan::PlanConfig& c) { return refusal(Tool::pytorch, c); };
  const plan::SearchResult r = plan::search(small_space(), o);
  ASSERT_FALSE(r.plans.empty());
  EXPECT_GT(r.rejected.not_runnable, 0);
  for (const plan::PlanResult& p : r.plans) EXPECT_EQ(refusal(Tool::pytorch, p.config), "");
}

// Finding 11: --distributed-optimizer (on) where every configuration has d = 1 found nothing
// ("all 0 were invalid"): the switch changes nothing there and is off.
TEST(InteropPytorch, SwitchesThatChangeNothingDoNotEmptyTheSearch) {
  plan::SearchSpace s = small_space();
  s.tp = {8};
  s.zero = {1};
  s.overlap_grad_reduce = {true};
  plan::SearchOptions o;
  o.jobs = 1;
  const plan::SearchResult r = plan::search(s, o);
  ASSERT_FALSE(r.plans.empty());
  EXPECT_EQ(r.plans.front().config.zero, 0);
  s.tp = {1};
  s.pp = {1};
  s.sequence_parallel = {true};
  s.tp_comm_overlap = {true};
  EXPECT_FALSE(plan::search(s, o).plans.empty());
}

}  // namespace
}  // namespace paci::interop
