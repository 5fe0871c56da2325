// Megatron-LM's flags for a plan: the findings of the interop issue that live in them (a layer
// count p does not divide, an uneven partition, bf16, the environment), and the shell words the
// flags travel in. tests/interop/check_megatron.py judges the same flags by Megatron's own code.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/errors.hpp"
#include "interop/megatron.hpp"
#include "interop/tool.hpp"
#include "interop/words.hpp"
#include "tests/interop/plans.hpp"

namespace paci::interop {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

std::string joined(const plan::PlanResult& p) {
  return shell_join(megatron_args(p));
}

TEST(InteropMegatron, FlagsOfAnInterleavedPlan) {
  const std::string f = joined(test::plan_of("llama3-70b", "interleaved", 256, 8, 4, 2));
  for (const char* flag : {"--tensor-model-parallel-size 8",
                           "--pipeline-model-parallel-size 4",
                           "--num-virtual-stages-per-pipeline-rank 2",
                           "--micro-batch-size 1",
                           "--global-batch-size 512",
                           "--recompute-granularity full --recompute-method uniform "
                           "--recompute-num-layers 1",
                           "--sequence-parallel",
                           "--use-distributed-optimizer",
                           "--overlap-grad-reduce",
                           "--num-layers 80",
                           "--hidden-size 8192",
                           "--num-attention-heads 64",
                           "--group-query-attention --num-query-groups 8",
                           "--ffn-hidden-size 28672",
                           "--seq-length 8192",
                           "--swiglu",
                           "--normalization RMSNorm",
                           "--position-embedding-type rope",
                           "--untie-embeddings-and-output-weights",
                           "--disable-bias-linear",
                           "--attention-backend auto"})
    EXPECT_THAT(f, HasSubstr(flag)) << flag;
  EXPECT_THAT(f, Not(HasSubstr("--pipeline-model-parallel-layout")));  // 80 = 4 x 2 x 10
}

// Finding 7: without --bf16 Megatron-LM trains in fp32.
TEST(InteropMegatron, TrainsInBf16) {
  EXPECT_THAT(megatron_args(test::plan_of("llama3-8b", "1f1b", 8, 2, 2)),
              testing::Contains("--bf16"));
}

// Finding 4: 126 layers on 64 stages is not Megatron's even split; the layout gives each stage
// paci's layers.
TEST(InteropMegatron, LayersPDoesNotDivideGoInALayout) {
  const plan::PlanResult p = test::plan_of("llama3-405b", "1f1b", 16384, 8, 64);
  const std::string layout = megatron_layout(p.config, p.config.partition);
  ASSERT_FALSE(layout.empty());
  EXPECT_EQ(layout.front(), 'E');
  EXPECT_EQ(layout.back(), 'L');
  EXPECT_EQ(std::count(layout.begin(), layout.end(), '|'), 63);
  EXPECT_EQ(std::count(layout.begin(), layout.end(), 't'), 126);
  EXPECT_THAT(joined(p), HasSubstr("--pipeline-model-parallel-layout '" + layout + "'"));
}

// Finding 5: an uneven partition was only a comment; Megatron-LM would have split evenly.
TEST(InteropMegatron, UnevenPartitionIsTheLayout) {
  plan::PlanResult p = test::plan_of("llama3-8b", "1f1b", 8, 2, 4);
  p.config.partition = {7, 9, 9, 7};
  EXPECT_EQ(megatron_layout(p.config, p.config.partition), "Ettttttt|ttttttttt|ttttttttt|tttttttL");
  p.config.partition = {8, 8, 8, 8};
  EXPECT_EQ(megatron_layout(p.config, p.config.partition), "");
  // Interleaved: the layout lists the p·v stages in model order, and stands for the virtual
  // stage count.
  plan::PlanResult v = test::plan_of("llama3-8b", "interleaved", 8, 2, 2, 2);
  v.config.partition = {7, 9, 9, 7};
  const std::string f = joined(v);
  EXPECT_THAT(
      f, HasSubstr("--pipeline-model-parallel-layout 'Ettttttt|ttttttttt|ttttttttt|tttttttL'"));
  EXPECT_THAT(f, Not(HasSubstr("--num-virtual-stages-per-pipeline-rank")));
}

// Finding 9: Megatron-LM's validate_args (core_v0.16.1) asserts CUDA_DEVICE_MAX_CONNECTIONS=1
// for any tensor parallelism before Blackwell, with or without SP and overlap (found by running
// it: tests/interop/check_megatron.py --tree).
TEST(InteropMegatron, EnvironmentForTensorParallelism) {
  plan::PlanConfig c = test::plan_of("llama3-8b", "1f1b", 8, 2, 2).config;
  const auto needed =
      ElementsAre(std::pair<std::string, std::string>("CUDA_DEVICE_MAX_CONNECTIONS", "1"));
  c.sequence_parallel = c.tp_comm_overlap = false;
  EXPECT_THAT(megatron_env(c), needed);
  c.sequence_parallel = c.tp_comm_overlap = true;
  EXPECT_THAT(megatron_env(c), needed);
  EXPECT_THAT(emit(Tool::megatron, test::result_of(c)), HasSubstr("CUDA_DEVICE_MAX_CONNECTIONS=1"));
  c.tp = 1;
  c.sequence_parallel = c.tp_comm_overlap = false;
  EXPECT_TRUE(megatron_env(c).empty());
}

TEST(InteropMegatron, SchedulesItCannotRunAreRefusedInOneLine) {
  for (const char* kind : {"paci", "pipedream", "2bw", "zb-h1", "zb-h2", "gpipe"}) {
    const plan::PlanResult p = test::plan_of("llama3-70b", kind, 256, 8, 4);
    const std::string why = refusal(Tool::megatron, p.config);
    EXPECT_THAT(why, HasSubstr("Megatron-LM cannot run")) << kind;
    EXPECT_EQ(why.find('\n'), std::string::npos);
    EXPECT_THROW(emit(Tool::megatron, p), InputError) << kind;
  }
  EXPECT_EQ(refusal(Tool::megatron, test::plan_of("llama3-70b", "1f1b", 256, 8, 4).config), "");
}

// Pipeline sends: the interleaved schedule overlaps them unless told not to; the non-interleaved
// one waits on them, and a plan that has them overlapped is one Megatron-LM cannot run.
TEST(InteropMegatron, PipelineSendsAreWaitedOnAsPlanned) {
  plan::PlanResult p = test::plan_of("llama3-70b", "interleaved", 256, 8, 4, 2);
  EXPECT_THAT(joined(p), Not(HasSubstr("overlap-p2p")));
  p.config.overlap_p2p = false;
  EXPECT_THAT(joined(p), HasSubstr("--no-overlap-p2p-communication"));
  plan::PlanResult one = test::plan_of("llama3-70b", "1f1b", 256, 8, 4);
  EXPECT_THAT(joined(one), Not(HasSubstr("overlap-p2p")));
  one.config.overlap_p2p = true;
  const std::string why = refusal(Tool::megatron, one.config);
  EXPECT_THAT(why, HasSubstr("--overlap-p2p off"));
  EXPECT_EQ(why.find('\n'), std::string::npos);
  EXPECT_THROW(emit(Tool::megatron, one), InputError);
  one.config.pp = 1;  // no pipeline, nothing sent
  EXPECT_EQ(refusal(Tool::megatron, one.config), "");
  // validate_args: interleaved without the overlap needs p > 2.
  plan::PlanResult two = test::plan_of("llama3-70b", "interleaved", 128, 8, 2, 2);
  EXPECT_EQ(refusal(Tool::megatron, two.config), "");
  two.config.overlap_p2p = false;
  EXPECT_THAT(refusal(Tool::megatron, two.config), HasSubstr("more than 2 pipeline stages"));
}

// DeepSeek-V3: multi-head latent attention (megatron-core's MLATransformerConfig), the dense first
// layers as megatron-core's MoE pattern with their own MLP width, the multi-token-prediction
// module on the last stage (the layout's m before the loss), where paci's cost model holds it.
TEST(InteropMegatron, DeepSeekV3LatentAttentionDenseLayersAndMtp) {
  plan::PlanResult p = test::plan_of("deepseek-v3", "1f1b", 256, 1, 16);
  p.config.ep = 8;
  p.config.partition.assign(16, 4);  // Megatron-Bridge's DeepSeek-V3 split on 16 stages
  p.config.partition.back() = 1;
  const std::string f = joined(p);
  for (const char* flag :
       {"--multi-latent-attention", "--q-lora-rank 1536", "--kv-lora-rank 512", "--qk-head-dim 128",
        "--qk-pos-emb-head-dim 64", "--v-head-dim 128", "--ffn-hidden-size 18432",
        "--moe-ffn-hidden-size 2048", "--moe-layer-freq '([0]*3+[1]*58)'",
        "--moe-shared-expert-intermediate-size 2048", "--num-experts 256", "--moe-router-topk 8",
        "--mtp-num-layers 1",
        "--qk-layernorm --rope-type yarn --rotary-scaling-factor 40 --mscale 1.0 --mscale-all-dim "
        "1.0",
        "--pipeline-model-parallel-layout 'Etttt|tttt|",
        // DeepSeek-V3's router, not Megatron-LM's default
        "--moe-router-score-function sigmoid --moe-router-enable-expert-bias",
        "--moe-router-num-groups 8 --moe-router-group-topk 4",
        "--moe-router-topk-scaling-factor 2.5",
        "--moe-router-load-balancing-type seq_aux_loss --moe-aux-loss-coeff 1e-4"})
    EXPECT_THAT(f, HasSubstr(flag)) << flag;
  EXPECT_THAT(f, HasSubstr("|tmL'"));  // the last stage: one layer, the MTP module, the loss

  // Without a query latent the queries come from h: no --q-lora-rank; without MTP no m.
  p.config.model.q_lora_rank = 0;
  p.config.model.mtp_layers = 0;
  const std::string g = joined(p);
  EXPECT_THAT(g, Not(HasSubstr("--q-lora-rank")));
  EXPECT_THAT(g, Not(HasSubstr("--mtp-num-layers")));
  EXPECT_THAT(g, HasSubstr("|tL'"));

  // A dense model keeps --ffn-hidden-size its MLP's and no MoE pattern.
  const std::string dense = joined(test::plan_of("llama3-8b", "1f1b", 8, 2, 2));
  EXPECT_THAT(dense, HasSubstr("--ffn-hidden-size 14336"));
  EXPECT_THAT(dense, Not(HasSubstr("--moe-layer-freq")));
  EXPECT_THAT(dense, Not(HasSubstr("--multi-latent-attention")));
  // Mixtral routes with Megatron-LM's softmax and the auxiliary loss.
  const std::string mixtral = joined(test::plan_of("mixtral-8x7b", "1f1b", 16, 2, 2));
  EXPECT_THAT(mixtral, HasSubstr("--moe-router-load-balancing-type aux_loss"));
  EXPECT_THAT(mixtral, Not(HasSubstr("--moe-router-score-function")));
}

TEST(InteropWords, QuoteAndSplitRoundTrip) {
  const std::vector<std::string> words = {"--a", "Et|tL", "it's", "", "x y", "plain-1.5"};
  EXPECT_EQ(shell_join(words), "--a 'Et|tL' 'it'\\''s' '' 'x y' plain-1.5");
  EXPECT_EQ(shell_split(shell_join(words), "flags"), words);
  EXPECT_THAT(shell_split("--x \"a b\" c\\ d \\\n --y", "flags"),
              ElementsAre("--x", "a b", "c d", "--y"));
  EXPECT_THROW(shell_split("--x 'open", "flags"), InputError);
  EXPECT_THROW(shell_split("--x \"$HOME\"", "flags"), InputError);
  EXPECT_THROW(shell_split("--x $(date)", "flags"), InputError);
}

// Context parallelism: its size and communication type, the environment variable it needs;
// ZeRO 2 and 3 are refused (Megatron-LM's own FSDP is not checked).
TEST(InteropMegatron, ContextParallelismAndZero) {
  plan::PlanResult p = test::plan_of("llama3-8b", "1f1b", 16, 1, 2);
  p.config.cp = 2;
  const std::string ring = joined(p);
  EXPECT_THAT(ring, HasSubstr("--context-parallel-size 2 --cp-comm-type p2p"));
  EXPECT_THAT(megatron_env(p.config),
              ElementsAre(std::pair<std::string, std::string>{"CUDA_DEVICE_MAX_CONNECTIONS", "1"}));
  p.config.cp_all_gather = true;
  EXPECT_THAT(joined(p), HasSubstr("--cp-comm-type all_gather"));
  p.config.zero = 1;
  EXPECT_THAT(joined(p), HasSubstr("--use-distributed-optimizer"));
  p.config.zero = 3;
  EXPECT_THAT(megatron_refusal(p.config), HasSubstr("ZeRO 3 for torchtitan's FSDP only"));
  EXPECT_THROW(joined(p), InputError);
}

// FP8: Transformer Engine's recipes by name, beside --bf16 (the weights and the rest stay bf16).
TEST(InteropMegatron, Fp8Recipes) {
  plan::PlanResult p = test::plan_of("llama3-8b", "1f1b", 16, 1, 2);
  EXPECT_THAT(joined(p), Not(HasSubstr("--fp8")));
  p.config.precision = plan::Precision::fp8;
  EXPECT_THAT(joined(p), HasSubstr("--bf16 --fp8-format hybrid --fp8-recipe delayed"));
  p.config.precision = plan::Precision::mxfp8;
  EXPECT_THAT(joined(p), HasSubstr("--bf16 --fp8-format e4m3 --fp8-recipe mxfp8"));
  EXPECT_THAT(joined(p), Not(HasSubstr("--grad-reduce-in-bf16")));
  p.config.bf16_gradients = true;
  EXPECT_THAT(joined(p), HasSubstr("--grad-reduce-in-bf16"));
}

}  // namespace
}  // namespace paci::interop
