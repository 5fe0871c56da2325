// compare_launch: a user's launch predicted, the best plan the same tool runs, the walk between.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "interop/read/compare.hpp"

namespace paci::interop {
namespace {

using ::testing::HasSubstr;

LaunchContext on_h100(std::int64_t gpus) {
  LaunchContext c;
  c.cluster = plan::cluster_preset("h100-80gb");
  c.gpus = gpus;
  return c;
}

plan::SearchOptions one_thread() {
  plan::SearchOptions o;
  o.jobs = 1;
  o.top = 3;
  return o;
}

// torchtitan's shipped 70B config (TP 8, full checkpointing) with a 4-stage pipeline on 128 GPUs:
// the search finds a faster plan torchtitan runs, and the walk ends on it.
TEST(InteropCompare, WalksFromTheLaunchToTheBestPlanTheToolRuns) {
  const std::string args =
      "--module llama3 --config llama3_70b --parallelism.pipeline-parallel-degree 4 "
      "--training.disable-cuda-graphs --training.local-batch-size 16";
  const LaunchComparison c =
      compare_launch(Tool::torchtitan, args, on_h100(128), std::nullopt, one_thread());
  EXPECT_EQ(c.mine.config.tp, 8);
  EXPECT_EQ(c.mine.config.pp, 4);
  ASSERT_TRUE(c.best.has_value());
  EXPECT_FALSE(c.launch_wins);
  EXPECT_LT(c.best->step_s, c.mine.step_s);
  EXPECT_EQ(refusal(Tool::torchtitan, c.best->config), "");
  ASSERT_FALSE(c.walk.empty());
  EXPECT_EQ(c.walk.back().result.config.kind, c.best->config.kind);
  EXPECT_EQ(c.walk.back().result.config.tp, c.best->config.tp);
  EXPECT_EQ(c.walk.back().result.config.pp, c.best->config.pp);
  EXPECT_DOUBLE_EQ(c.walk.back().result.step_s, c.best->step_s);
  const ordered_json j = launch_json(c);
  EXPECT_EQ(j["tool"], "torchtitan");
  EXPECT_EQ(j["gpus"], 128);
  EXPECT_EQ(j["seq_len"], 8192);
  EXPECT_EQ(j["best_is_launch"], false);
  EXPECT_EQ(j["walk"].size(), c.walk.size());
  EXPECT_THAT(launch_text(c), HasSubstr("the launch, read as torchtitan 0.3.0 reads it:"));
}

// An HSDP launch (FSDP over 4, replicated twice): read with its group, the group searched beside
// full sharding, and the walk ends on the best plan, its ZeRO stage and group included.
TEST(InteropCompare, AnHsdpLaunchKeepsItsGroupThroughTheWalk) {
  const std::string args =
      "--module llama3 --config llama3_8b --parallelism.tensor-parallel-degree 2 "
      "--parallelism.data-parallel-replicate-degree 2 --parallelism.data-parallel-shard-degree 4";
  const LaunchComparison c =
      compare_launch(Tool::torchtitan, args, on_h100(16), std::nullopt, one_thread());
  EXPECT_EQ(c.mine.config.shard_group, 4);
  EXPECT_EQ(c.mine.config.zero, 3);
  EXPECT_EQ(c.space.shard_group, (std::vector<std::int64_t>{0, 4}));
  ASSERT_TRUE(c.best.has_value());
  if (!c.launch_wins) {
    ASSERT_FALSE(c.walk.empty());
    const plan::PlanConfig& end = c.walk.back().result.config;
    EXPECT_EQ(end.zero, c.best->config.zero);
    EXPECT_EQ(end.shard_group, c.best->config.shard_group);
    EXPECT_DOUBLE_EQ(c.walk.back().result.step_s, c.best->step_s);
  }
}

// --emit pytorch: the search keeps to what PyTorch's CSV runs, whatever tool the launch was for.
TEST(InteropCompare, TheTargetToolBoundsTheSearch) {
  const std::string flags =
      "--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --group-query-attention "
      "--num-query-groups 8 --ffn-hidden-size 14336 --seq-length 8192 --swiglu --normalization "
      "RMSNorm --position-embedding-type rope --untie-embeddings-and-output-weights --bf16 "
      "--micro-batch-size 1 --global-batch-size 64 --vocab-size 128256 "
      "--pipeline-model-parallel-size 4";
  const LaunchComparison c =
      compare_launch(Tool::megatron, flags, on_h100(16), Tool::pytorch, one_thread());
  EXPECT_EQ(c.runs, Tool::pytorch);
  ASSERT_TRUE(c.best.has_value());
  EXPECT_EQ(refusal(Tool::pytorch, c.best->config), "");
  for (const plan::PlanResult& p : c.search.plans) EXPECT_EQ(refusal(Tool::pytorch, p.config), "");
  EXPECT_LE(c.best->step_s, c.mine.step_s);
}

}  // namespace
}  // namespace paci::interop
