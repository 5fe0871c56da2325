// torchtitan 0.3.0's command line for a plan: the findings of the interop issue that live in it
// (FSDP beside TP/PP, each stage's modules, async TP's compile, precision, the CSV by absolute
// path, the model) and what it refuses. tests/interop/check_torchtitan.py judges the same words
// by torchtitan's own parser, parallel dimensions and stage split.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/errors.hpp"
#include "interop/tool.hpp"
#include "interop/torchtitan.hpp"
#include "interop/words.hpp"
#include "tests/interop/plans.hpp"

namespace paci::interop {
namespace {

using ::testing::ElementsAre;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

std::string joined(const plan::PlanResult& p, const std::string& csv = "") {
  return shell_join(torchtitan_args(p, csv));
}

TEST(InteropTorchtitan, ModelIsTorchtitansConfig) {
  const std::string a = joined(test::plan_of("llama3-8b", "1f1b", 8, 2, 2));
  EXPECT_THAT(a, StartsWith("--module llama3 --config llama3_8b "));
  EXPECT_THAT(joined(test::plan_of("llama3-70b", "1f1b", 64, 8, 4)),
              StartsWith("--module llama3 --config llama3_70b "));
  // DeepSeek-V3 is torchtitan's deepseek_v3_671b without the multi-token-prediction module,
  // which that config does not build: with it the plan is refused.
  plan::PlanResult ds = test::plan_of("deepseek-v3", "1f1b", 256, 1, 16);
  ds.config.ep = 8;
  EXPECT_THAT(torchtitan_refusal(ds.config), HasSubstr("with multi-token prediction"));
  ds.config.model.mtp_layers = 0;
  EXPECT_EQ(torchtitan_refusal(ds.config), "");
  EXPECT_THAT(joined(ds), StartsWith("--module deepseek_v3 --config deepseek_v3_671b "));
  ds.config.model.dense_layers = 2;  // a shape torchtitan has no config for
  EXPECT_THAT(torchtitan_refusal(ds.config), HasSubstr("cannot train deepseek-v3"));
}

// Finding 2: torchtitan 0.3.0 replicates (ZeRO 0: DDP, or HSDP with one shard beside TP or PP) or
// shards (FSDP), and the ZeRO stage is its resharding policy: with PP whole weights through the
// step (1) or resharded after every forward (3); without PP resharded (3).
TEST(InteropTorchtitan, DataParallelismShardsBesideTensorAndPipeline) {
  plan::PlanResult p = test::plan_of("llama3-8b", "1f1b", 16, 2, 2);  // d = 4
  p.config.zero = 1;
  std::string a = joined(p);
  EXPECT_THAT(a, HasSubstr("--parallelism.data-parallel-replicate-degree 1 "));
  EXPECT_THAT(a, HasSubstr("--parallelism.data-parallel-shard-degree 4 "));
  EXPECT_THAT(a, HasSubstr("--parallelism.fsdp-reshard-after-forward never "));
  p.config.zero = 3;
  EXPECT_THAT(joined(p), HasSubstr("--parallelism.fsdp-reshard-after-forward always "));
  p.config.zero = 0;  // replicated beside TP and PP: HSDP with one shard
  EXPECT_EQ(torchtitan_refusal(p.config), "");
  EXPECT_THAT(joined(p), HasSubstr("--parallelism.data-parallel-replicate-degree 4 "
                                   "--parallelism.data-parallel-shard-degree 1 "));
  p.config.zero = 2;
  EXPECT_THAT(torchtitan_refusal(p.config), HasSubstr("has no ZeRO 2"));
  plan::PlanResult dp_only = test::plan_of("llama3-8b", "1f1b", 8, 1, 1);
  dp_only.config.zero = 0;
  a = joined(dp_only);
  EXPECT_THAT(a, HasSubstr("--parallelism.data-parallel-replicate-degree 8 "));
  EXPECT_THAT(a, Not(HasSubstr("reshard")));
  dp_only.config.zero = 3;  // sharded: FSDP
  EXPECT_THAT(joined(dp_only), HasSubstr("--parallelism.data-parallel-shard-degree 8 "));
  dp_only.config.zero = 1;
  EXPECT_THAT(torchtitan_refusal(dp_only.config), HasSubstr("plan ZeRO 3, or ZeRO 1 with PP"));
}

// Context parallelism: torchtitan 0.3.0's (PyTorch's SDPA dispatcher) all-gathers the keys and
// values and shards the weights over data x context (FSDP): a ring or ZeRO 0 is refused.
TEST(InteropTorchtitan, ContextParallelismAllGathersAndShards) {
  plan::PlanResult p = test::plan_of("llama3-8b", "1f1b", 16, 2, 2);
  p.config.cp = 2;  // d = 2
  p.config.cp_all_gather = true;
  p.config.zero = 1;
  const std::string a = joined(p);
  EXPECT_THAT(a, HasSubstr("--parallelism.context-parallel-degree 2 "));
  EXPECT_THAT(a, HasSubstr("--parallelism.data-parallel-shard-degree 2 "));
  EXPECT_THAT(a, HasSubstr("--parallelism.fsdp-reshard-after-forward never "));
  p.config.cp_all_gather = false;
  EXPECT_THAT(torchtitan_refusal(p.config), HasSubstr("plan --cp-comm all-gather"));
  p.config.cp_all_gather = true;
  p.config.zero = 0;
  EXPECT_THAT(torchtitan_refusal(p.config), HasSubstr("shards over its context-parallel GPUs"));
}

// FP8: torchtitan 0.3.0 has no option for it (its config registry alone turns float8 on), so an
// FP8 plan is refused, naming what would work.
TEST(InteropTorchtitan, Fp8IsRefused) {
  plan::PlanResult p = test::plan_of("llama3-8b", "1f1b", 16, 2, 2);
  p.config.precision = plan::Precision::fp8;
  EXPECT_THAT(torchtitan_refusal(p.config), HasSubstr("no option turns float8 on"));
  EXPECT_THAT(torchtitan_refusal(p.config), HasSubstr("--emit megatron"));
  EXPECT_THROW(joined(p), InputError);
  p.config.precision = plan::Precision::bf16;
  p.config.bf16_gradients = true;
  EXPECT_THAT(torchtitan_refusal(p.config), HasSubstr("plan --grad-dtype fp32"));
}

// Findings 3 and 5: every stage's modules, exactly as paci partitioned them.
TEST(InteropTorchtitan, EachStageGetsItsModules) {
  plan::PlanResult p = test::plan_of("llama3-8b", "interleaved", 8, 2, 2, 2);
  p.config.partition = {7, 9, 9, 7};
  const std::vector<std::string> parts = torchtitan_module_parts(p.config);
  ASSERT_EQ(parts.size(), 4U);
  EXPECT_THAT(parts[0], StartsWith("tok_embeddings,layers.0,"));
  EXPECT_THAT(parts[0], EndsWith(",layers.6"));
  EXPECT_THAT(parts[1], StartsWith("layers.7,"));
  EXPECT_THAT(parts[1], EndsWith(",layers.15"));
  EXPECT_THAT(parts[3], StartsWith("layers.25,"));
  EXPECT_THAT(parts[3], EndsWith(",layers.31,norm,lm_head"));
  const std::string a = joined(p);
  EXPECT_THAT(a, HasSubstr("--parallelism.pipeline-parallel-schedule Interleaved1F1B "));
  EXPECT_THAT(a, HasSubstr("--parallelism.module-fqns-per-model-part tok_embeddings,layers.0,"));
  EXPECT_THAT(a, HasSubstr("--training.disable-cuda-graphs"));  // PP: CUDA graphs refuse it
}

// Finding 6: asynchronous TP is a compiler pass.
TEST(InteropTorchtitan, AsyncTensorParallelismTurnsOnCompile) {
  plan::PlanResult p = test::plan_of("llama3-8b", "1f1b", 8, 2, 2);
  EXPECT_THAT(joined(p), Not(HasSubstr("--compile.")));
  p.config.tp_comm_overlap = true;
  EXPECT_THAT(joined(p), HasSubstr("--compile.enable --compile.enable-async-tensor-parallel"));
}

// Finding 7: bf16 mixed precision, reductions in fp32; sequence parallelism off when planned off.
TEST(InteropTorchtitan, MixedPrecisionAndSequenceParallelism) {
  plan::PlanResult p = test::plan_of("llama3-8b", "1f1b", 8, 2, 2);
  EXPECT_THAT(joined(p), HasSubstr("--training.mixed-precision-param bfloat16 "
                                   "--training.mixed-precision-reduce float32"));
  EXPECT_THAT(joined(p), Not(HasSubstr("no-enable-sequence-parallel")));
  p.config.sequence_parallel = false;
  EXPECT_THAT(joined(p), HasSubstr("--parallelism.no-enable-sequence-parallel"));
}

// Finding 10: a zero-bubble schedule is loaded from paci's CSV, named by its absolute path; the
// checkpointing subcommand is the last word.
TEST(InteropTorchtitan, ZeroBubbleNamesTheCsvByAbsolutePath) {
  plan::PlanResult p = test::plan_of("llama3-8b", "zb-h1", 8, 1, 4);
  const std::string a = joined(p, "/runs/plan/schedule.csv");
  EXPECT_THAT(a, HasSubstr("--parallelism.pipeline-parallel-schedule-csv /runs/plan/schedule.csv"));
  EXPECT_THAT(a, Not(HasSubstr("--parallelism.pipeline-parallel-schedule ")));
  EXPECT_THAT(a, EndsWith(" activation-checkpoint:full"));
  // --emit without -o DIR has no CSV to name: refused, not printed with a relative path.
  EXPECT_THROW(emit(Tool::torchtitan, p, ""), InputError);
  EXPECT_THAT(emit(Tool::torchtitan, p, "/runs/plan"),
              HasSubstr("--parallelism.pipeline-parallel-schedule-csv /runs/plan/schedule.csv"));
}

TEST(InteropTorchtitan, RefusesWhatItCannotRunInOneLine) {
  const auto why = [](const plan::PlanResult& p) { return refusal(Tool::torchtitan, p.config); };
  for (const char* kind : {"paci", "pipedream", "2bw"}) {
    const std::string w = why(test::plan_of("llama3-8b", kind, 8, 1, 4));
    EXPECT_THAT(w, HasSubstr("flush")) << kind;
    EXPECT_EQ(w.find('\n'), std::string::npos);
  }
  EXPECT_THAT(why(test::plan_of("gpt3-13b", "1f1b", 8, 1, 4)), HasSubstr("own configs"));
  // Llama 3 405B: torchtitan's config is float8, fixed when built; paci plans bf16.
  EXPECT_THAT(why(test::plan_of("llama3-405b", "1f1b", 512, 8, 16)), HasSubstr("float8"));
  EXPECT_THROW(torchtitan_args(test::plan_of("llama3-405b", "1f1b", 512, 8, 16), ""), InputError);
  EXPECT_TRUE(why(test::plan_of("llama3-70b", "1f1b", 64, 8, 4)).empty());
  // PyTorch's runtimes overlap the sends of every kind but 1F1B, which runs either way
  // (Schedule1F1B waits on its steady phase's sends, the CSV runtime does not).
  plan::PlanResult one = test::plan_of("llama3-70b", "1f1b", 64, 8, 4);
  EXPECT_TRUE(why(one).empty());
  one.config.overlap_p2p = true;
  EXPECT_TRUE(why(one).empty());
  plan::PlanResult interleaved = test::plan_of("llama3-70b", "interleaved", 64, 8, 4, 2);
  EXPECT_TRUE(why(interleaved).empty());
  interleaved.config.overlap_p2p = false;
  EXPECT_THAT(why(interleaved), HasSubstr("--overlap-p2p on"));
  EXPECT_EQ(why(interleaved).find('\n'), std::string::npos);
}

}  // namespace
}  // namespace paci::interop
