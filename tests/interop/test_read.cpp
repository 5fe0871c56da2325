// paci plan --from-megatron / --from-torchtitan: a launch read back as its tool reads it. What paci
// emits reads back to the same configuration; the splits follow the tools' own rules
// (megatron-core's get_num_layers_to_build and layout parser, torchtitan's
// _generate_llm_fqn_per_model_part: the matrix in tests/interop/run_matrix.py checks the same
// readings against that code); each option is checked against the recorded parser; what a tool
// refuses or paci does not model is one line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <numeric>

#include "base/errors.hpp"
#include "interop/megatron.hpp"
#include "interop/pytorch.hpp"
#include "interop/read/launch.hpp"
#include "interop/read/options.hpp"
#include "interop/torchtitan.hpp"
#include "interop/words.hpp"
#include "tests/interop/plans.hpp"

namespace paci::interop {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

LaunchContext on_h100(std::optional<std::int64_t> gpus) {
  LaunchContext c;
  c.cluster = plan::cluster_preset("h100-80gb");
  c.gpus = gpus;
  return c;
}

// The knobs a launch carries, as one comparable tuple.
auto knobs(const plan::PlanConfig& c) {
  return std::make_tuple(c.model, c.gpus, c.global_batch, c.tp, c.pp, c.chunks, c.kind,
                         c.microbatch_size, c.recompute, c.sequence_parallel, c.tp_comm_overlap,
                         c.zero, c.overlap_grad_reduce, c.flash_attention, c.partition,
                         c.p2p_overlapped());
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

std::string megatron_error(const std::string& flags, std::int64_t gpus = 16) {
  return message_of([&] { read_megatron(flags, on_h100(gpus)); });
}

std::string torchtitan_error(const std::string& args, std::int64_t gpus = 16) {
  return message_of([&] { read_torchtitan(args, on_h100(gpus)); });
}

const std::string kLlama8b =
    "--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --group-query-attention "
    "--num-query-groups 8 --ffn-hidden-size 14336 --seq-length 8192 --swiglu --normalization "
    "RMSNorm --position-embedding-type rope --untie-embeddings-and-output-weights --bf16 "
    "--micro-batch-size 1 --global-batch-size 64 ";

// --- Megatron-LM ---------------------------------------------------------------------------------

TEST(InteropRead, MegatronReadsBackWhatPaciEmits) {
  std::vector<plan::PlanResult> plans = {
      test::plan_of("llama3-70b", "1f1b", 64, 8, 4),
      test::plan_of("llama3-70b", "interleaved", 64, 8, 4, 5),
      test::plan_of("gpt3-175b", "1f1b", 1024, 8, 16),
      test::plan_of("gpt3-1.3b", "1f1b", 8, 1, 1),
  };
  plan::PlanResult uneven = test::plan_of("llama3-8b", "1f1b", 16, 2, 4);
  uneven.config.partition = {7, 9, 9, 7};
  uneven.config.recompute = plan::Recompute::selective;
  uneven.config.tp_comm_overlap = true;
  plans.push_back(uneven);
  plan::PlanResult waited = test::plan_of("llama3-70b", "interleaved", 64, 8, 4, 2);
  waited.config.overlap_p2p = false;  // --no-overlap-p2p-communication
  plans.push_back(waited);
  // DeepSeek-V3: latent attention, dense first layers, MTP in the layout, its router.
  plan::PlanResult deepseek = test::plan_of("deepseek-v3", "1f1b", 256, 1, 16);
  deepseek.config.ep = 8;
  deepseek.config.partition.assign(16, 4);
  deepseek.config.partition.back() = 1;
  plans.push_back(deepseek);
  for (const plan::PlanResult& p : plans) {
    const std::string flags = shell_join(megatron_args(p));
    const ReadLaunch r = read_megatron(flags, on_h100(p.config.gpus));
    EXPECT_EQ(knobs(r.config), knobs(p.config)) << flags;
  }
}

// DeepSeek-V3's router read from its flags, on a model without latent attention; and latent
// attention with megatron-core's parser defaults where the flags are silent.
TEST(InteropRead, MegatronReadsDeepSeekV3sRouter) {
  const std::string experts =
      "--num-experts 64 --moe-router-topk 6 --moe-router-score-function sigmoid "
      "--moe-router-enable-expert-bias --moe-router-num-groups 8 --moe-router-group-topk 4 "
      "--moe-router-topk-scaling-factor 2.5 --vocab-size 128256 ";
  EXPECT_EQ(read_megatron(kLlama8b + experts, on_h100(16)).config.model.router,
            plan::Router::deepseek_v3);
  EXPECT_EQ(read_megatron(kLlama8b + "--num-experts 8 --moe-router-topk 2 --vocab-size 128256",
                          on_h100(16))
                .config.model.router,
            plan::Router::softmax);
  // --kv-lora-rank 32, no query latent, heads of 128 with 64 rotary columns: 32 x 128 = 4096 = h,
  // so no head width of its own.
  const plan::ModelSpec mla =
      read_megatron(kLlama8b + "--multi-latent-attention --qk-layernorm --vocab-size 128256",
                    on_h100(16))
          .config.model;
  EXPECT_EQ(std::tuple(mla.kv_lora_rank, mla.q_lora_rank, mla.rope_head_width, mla.head_width,
                       mla.head_dim(), mla.kv_heads),
            std::tuple(32, 0, 64, 0, 128, 32));
  // A pattern of 1s alone is every layer routed; dense layers first, and MTP on a Llama.
  const plan::ModelSpec routed =
      read_megatron(kLlama8b +
                        "--num-experts 8 --moe-router-topk 2 --moe-layer-freq [1]*32 "
                        "--vocab-size 128256",
                    on_h100(16))
          .config.model;
  EXPECT_EQ(routed.dense_layers, 0);
  const plan::ModelSpec dense_first =
      read_megatron(kLlama8b +
                        "--num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 2048 "
                        "--moe-layer-freq ([0]*2+[1]*30) --mtp-num-layers 1 --vocab-size 128256",
                    on_h100(16))
          .config.model;
  EXPECT_EQ(std::tuple(dense_first.dense_layers, dense_first.dense_ffn, dense_first.ffn,
                       dense_first.mtp_layers),
            std::tuple(2, 14336, 2048, 1));
}

TEST(InteropRead, MegatronLayoutUnrollsAsMegatronCoreDoes) {
  // "Et*3|(tt|)*2,t|tL": the comma dropped, the group and t*3 unrolled: "Ettt|tt|tt|t|tL".
  const ReadLaunch r = read_megatron(
      "--num-layers 9 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024 --bf16 "
      "--micro-batch-size 1 --global-batch-size 8 --vocab-size 50257 "
      "--pipeline-model-parallel-size 5 "
      "--pipeline-model-parallel-layout 'Et*3|(tt|)*2,t|tL'",
      on_h100(5));
  EXPECT_THAT(r.config.partition, ElementsAre(3, 2, 2, 1, 1));
  EXPECT_EQ(r.config.kind, "1f1b");
  // Ten stages on five ranks: two virtual stages each.
  const ReadLaunch v = read_megatron(
      "--num-layers 20 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024 --bf16 "
      "--micro-batch-size 1 --global-batch-size 10 --vocab-size 50257 "
      "--pipeline-model-parallel-size 5 --pipeline-model-parallel-layout 'E(tt|)*9tt,L'",
      on_h100(5));
  EXPECT_EQ(v.config.kind, "interleaved");
  EXPECT_EQ(v.config.chunks, 2);
  EXPECT_EQ(v.config.partition, std::vector<std::int32_t>(10, 2));
}

TEST(InteropRead, MegatronUnevenSplitsFollowGetNumLayersToBuild) {
  const std::string base =
      "--hidden-size 1024 --num-attention-heads 16 --seq-length 1024 --bf16 --micro-batch-size 1 "
      "--global-batch-size 8 --vocab-size 50257 --pipeline-model-parallel-size 4 ";
  EXPECT_THAT(read_megatron(base + "--num-layers 30 --decoder-first-pipeline-num-layers 6 "
                                   "--decoder-last-pipeline-num-layers 6",
                            on_h100(4))
                  .config.partition,
              ElementsAre(6, 9, 9, 6));
  EXPECT_THAT(
      read_megatron(base + "--num-layers 31 --account-for-embedding-in-pipeline-split", on_h100(4))
          .config.partition,
      ElementsAre(7, 8, 8, 8));
  // Two virtual stages: rank r's layers split in two, model stage j·p + r.
  EXPECT_THAT(read_megatron(base + "--num-layers 28 --decoder-first-pipeline-num-layers 4 "
                                   "--num-virtual-stages-per-pipeline-rank 2",
                            on_h100(4))
                  .config.partition,
              ElementsAre(2, 4, 4, 4, 2, 4, 4, 4));
  EXPECT_THAT(megatron_error(base + "--num-layers 30"),
              HasSubstr("num_layers must be divisible by the pipeline size"));
}

TEST(InteropRead, MegatronTakesTheWorldFromTorchrun) {
  const ReadLaunch r = read_megatron(
      "CUDA_DEVICE_MAX_CONNECTIONS=1 torchrun --nnodes 2 --nproc-per-node=8 --rdzv-backend c10d "
      "pretrain_gpt.py --tensor-model-parallel-size 2 " +
          kLlama8b,
      on_h100(std::nullopt));
  EXPECT_EQ(r.config.gpus, 16);
  EXPECT_EQ(r.config.dp(), 8);
  EXPECT_EQ(r.config.model.name, "llama3-8b");
  EXPECT_THAT(r.program, ElementsAre("torchrun", "--nnodes", "2", "--nproc-per-node", "8",
                                     "--rdzv-backend", "c10d", "pretrain_gpt.py"));
  EXPECT_THAT(message_of([&] { read_megatron(kLlama8b, on_h100(std::nullopt)); }),
              HasSubstr("--gpus is missing"));
  EXPECT_THAT(message_of([&] {
                read_megatron("torchrun --nproc-per-node 8 pretrain_gpt.py " + kLlama8b,
                              on_h100(16));
              }),
              HasSubstr("--gpus 16 but the launch's torchrun starts 8 processes"));
}

TEST(InteropRead, MegatronDefaultsAreMegatronsOwn) {
  // No --global-batch-size: micro-batch × data parallel; SwiGLU without --ffn-hidden-size:
  // 2/3 of 4h rounded down to 64 (validate_args).
  const ReadLaunch r = read_megatron(
      "--num-layers 4 --hidden-size 1000 --num-attention-heads 10 --seq-length 512 --swiglu "
      "--normalization RMSNorm --position-embedding-type rope --bf16 --micro-batch-size 2 "
      "--vocab-size 32000",
      on_h100(8));
  EXPECT_EQ(r.config.global_batch, 16);
  EXPECT_EQ(r.config.model.ffn, 2624);  // int(4·1000·2/3 / 64)·64
  EXPECT_EQ(r.config.model.arch, plan::Arch::llama);
  EXPECT_EQ(r.config.model.kv_heads, 10);
  EXPECT_TRUE(r.config.model.tied_embeddings);
}

TEST(InteropRead, MegatronOptionsAreCheckedAgainstItsRecordedParser) {
  EXPECT_THAT(megatron_error(kLlama8b + "--tensor-parallel-size 2"),
              HasSubstr("Megatron-LM core_v0.16.1 has no option --tensor-parallel-size"));
  EXPECT_THAT(megatron_error(kLlama8b + "--tensor-model-parallel-size two"),
              HasSubstr("--tensor-model-parallel-size takes a whole number, got 'two'"));
  EXPECT_THAT(megatron_error(kLlama8b + "--recompute-granularity most"),
              HasSubstr("takes one of full, selective, got 'most'"));
  EXPECT_THAT(megatron_error(kLlama8b + "--seq-length"), HasSubstr("--seq-length needs 1 value"));
  EXPECT_THAT(megatron_error(kLlama8b + "--bf16=yes"), HasSubstr("--bf16 takes no value"));
  // FP8 (Transformer Engine): per-tensor recipes read as fp8, MXFP8 as mxfp8; FP8 on a GPU
  // without it is the plan's own one-line refusal.
  EXPECT_EQ(read_megatron(kLlama8b + "--fp8-format hybrid", on_h100(16)).config.precision,
            plan::Precision::fp8);
  EXPECT_EQ(read_megatron(kLlama8b + "--fp8-format hybrid --fp8-recipe tensorwise", on_h100(16))
                .config.precision,
            plan::Precision::fp8);
  EXPECT_EQ(read_megatron(kLlama8b, on_h100(16)).config.precision, plan::Precision::bf16);
  EXPECT_FALSE(read_megatron(kLlama8b, on_h100(16)).config.bf16_gradients);
  EXPECT_TRUE(read_megatron(kLlama8b + "--grad-reduce-in-bf16", on_h100(16)).config.bf16_gradients);
  {
    LaunchContext b200 = on_h100(16);
    b200.cluster = plan::cluster_preset("b200");
    EXPECT_EQ(
        read_megatron(kLlama8b + "--fp8-format e4m3 --fp8-recipe mxfp8", b200).config.precision,
        plan::Precision::mxfp8);
    EXPECT_THROW(read_megatron(kLlama8b + "--fp8-format e4m3 --fp8-recipe mxfp8", on_h100(16)),
                 InputError);
  }
  // Options paci does not model still parse (the data, the optimizer).
  EXPECT_NO_THROW(read_megatron(kLlama8b + "--lr 3e-4 --train-iters 10 --mock-data", on_h100(16)));
}

TEST(InteropRead, MegatronRefusalsAreOneLine) {
  const std::pair<std::string, std::string> cases[] = {
      {"--context-parallel-size 2 --cp-comm-type a2a", "paci models p2p (a ring) and all_gather"},
      {"--expert-model-parallel-size 2", "--expert-model-parallel-size without --num-experts"},
      {"--num-experts 8 --moe-router-topk 2 --expert-tensor-parallel-size 2",
       "paci models whole experts on each GPU"},
      {"--num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 2048 "
       "--moe-layer-freq ([1]*31+[0])",
       "paci models dense layers first, then experts in all the rest"},
      {"--num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 2048 "
       "--moe-layer-freq ([0]*3+[1]*28)",
       "--moe-layer-freq: the pattern has 31 entries, --num-layers 32"},
      {"--num-experts 8 --moe-router-topk 2 --moe-layer-freq '([0]*3 + [1]*29)'",
       "character 7 of the pattern is not one of ,0-9[]()+*"},
      {"--num-experts 8 --moe-router-topk 2 --moe-layer-freq [0]*0*2147483647*2147483647",
       "the pattern has 0 entries"},
      {"--num-experts 8 --moe-router-topk 2 --moe-layer-freq [0]*32",
       "paci models dense layers first, then experts in all the rest"},
      {"--num-experts 8 --moe-router-topk 2 --moe-layer-freq " + std::string(300, '(') + "[1]" +
           std::string(300, ')'),
       "more than 200 nested parentheses"},
      {"--num-experts 8 --moe-router-topk 2 --moe-layer-freq " + std::string(5000, '['),
       "longer than 4096 characters"},
      {"--num-experts 8 --moe-router-topk 2 --moe-layer-freq [0]*99999999",
       "it unrolls past 2^20 layers"},
      {"--num-experts 8 --moe-router-topk 2 --moe-layer-freq ([0]*3+[2]*29)",
       "its entries are 0 (dense) or 1 (experts)"},
      {"--num-experts 8 --moe-router-topk 2 --moe-layer-freq __import__('os')",
       "character 1 of the pattern is not one of"},
      {"--num-experts 8 --moe-router-topk 2 --moe-layer-freq '[1]*31\n+[1]'",
       "character 7 of the pattern is not one of"},
      {"--num-experts 8 --moe-router-topk 2 --moe-layer-freq 3*[1]", "a list expected"},
      {"--multi-latent-attention --q-lora-rank 1536 --kv-lora-rank 512",
       "--multi-latent-attention without --qk-layernorm"},
      {"--multi-latent-attention --qk-layernorm --qk-head-dim 128 --v-head-dim 64",
       "--qk-head-dim 128 and --v-head-dim 64: paci models latent attention with query, key and "
       "value heads of one width"},
      {"--num-experts 8 --moe-router-topk 2 --mtp-num-layers 1 --vocab-size 128256 "
       "--pipeline-model-parallel-size 2 --pipeline-model-parallel-layout Et*16|t*16L",
       "has 0 multi-token-prediction modules (m), --mtp-num-layers 1"},
      {"--num-experts 8 --moe-router-topk 2 --mtp-num-layers 1 --vocab-size 128256 "
       "--pipeline-model-parallel-size 2 --pipeline-model-parallel-layout Et*16m|t*16L",
       "the multi-token-prediction modules (m) go on the last stage"},
      {"--num-experts 16 --moe-router-topk 2 --moe-router-score-function sigmoid "
       "--moe-router-num-groups 4 --moe-router-group-topk 2",
       "a sigmoid router with 4 expert groups keeping 2, scaled by none: paci reads Megatron-LM's "
       "softmax router and DeepSeek-V3's"},
      {"--num-experts 16 --moe-router-topk 4 --moe-router-score-function sigmoid "
       "--moe-router-num-groups 8 --moe-router-group-topk 4",
       "a sigmoid router with 8 expert groups keeping 4, scaled by none"},
      {"--num-experts 8 --moe-router-topk 9 --vocab-size 128256",
       "--top-k 9 must be between 1 and the 8 experts"},
      {"--fp8-format e4m3 --fp8-recipe blockwise", "paci models FP8 with per-tensor scales"},
      {"--fp16", "paci models bf16"},
      {"--tensor-model-parallel-size 2 --tp-comm-overlap",
       "refuses --tp-comm-overlap without --sequence-parallel"},
      {"--tensor-model-parallel-size 3", "not divisible"},
      {"--global-batch-size 60", "not divisible by micro-batch 1"},
      {"--recompute-granularity full", "needs --recompute-method"},
      {"--recompute-granularity full --recompute-method block --recompute-num-layers 2",
       "paci models recomputing all of them or none"},
      {"--pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2 "
       "--num-layers-per-virtual-pipeline-stage 4",
       "takes one of"},
  };
  for (const auto& [extra, why] : cases) {
    const std::string e = megatron_error(kLlama8b + extra);
    EXPECT_THAT(e, HasSubstr(why)) << extra;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
  std::string no_bf16 = kLlama8b;
  no_bf16.erase(no_bf16.find("--bf16 "), 7);
  EXPECT_THAT(megatron_error(no_bf16), HasSubstr("no --bf16: Megatron-LM would train in fp32"));
  // Single quotes keep a $ as is (then the value is no number); outside them it is refused.
  EXPECT_THAT(megatron_error(kLlama8b + "--seq-length '$SEQ'"),
              HasSubstr("--seq-length takes a whole number, got '$SEQ'"));
  EXPECT_THAT(megatron_error(kLlama8b + "--seq-length \"$SEQ\""),
              HasSubstr("asks the shell to expand something"));
}

// Bad input found by a review: numbers that would overflow a product, a nested layout that would
// unroll forever, layouts megatron-core refuses, recomputation TransformerConfig refuses. Each is
// one line, none crashes or hangs.
TEST(InteropRead, MegatronBadInputIsOneLineNeverACrashOrAHang) {
  const std::string shape =
      "--num-layers 8 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024 --bf16 "
      "--vocab-size 50257 ";
  const std::pair<std::string, std::string> cases[] = {
      {kLlama8b + "--micro-batch-size 4611686018427387904", "up to 2^31 - 1"},
      {kLlama8b + "--tensor-model-parallel-size 4294967298", "up to 2^31 - 1"},
      {shape + "--micro-batch-size 1 --pipeline-model-parallel-size 2 "
               "--pipeline-model-parallel-layout '(t*60000)*60000'",
       "unrolls to more than"},
      {shape + "--micro-batch-size 1 --pipeline-model-parallel-size 2 "
               "--pipeline-model-parallel-layout 'tEttt|ttttL'",
       "the embedding (E) must be there once, the first layer"},
      {shape + "--micro-batch-size 1 --pipeline-model-parallel-size 2 "
               "--pipeline-model-parallel-layout 'Etttt|tttLt'",
       "the loss (L) must be there once, the last layer"},
      {shape + "--micro-batch-size 1 --pipeline-model-parallel-size 2 "
               "--pipeline-model-parallel-layout 'Ettt|ttL'",
       "the layout has 5 transformer layers (t), --num-layers is 8"},
      {kLlama8b + "--recompute-granularity full --recompute-method uniform",
       "needs --recompute-num-layers"},
      {kLlama8b + "--recompute-granularity selective --recompute-method uniform",
       "refuses --recompute-method with selective"},
      {kLlama8b + "--pipeline-model-parallel-size 4 --decoder-first-pipeline-num-layers 2 "
                  "--decoder-last-pipeline-num-layers 6 --recompute-granularity full "
                  "--recompute-method block --recompute-num-layers 4",
       "recomputes part of a stage's 12 layers"},
      {kLlama8b + "--pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 4 "
                  "--decoder-first-pipeline-num-layers 8",
       "refuses --num-layers-per-virtual-pipeline-stage with"},
      {kLlama8b + "--use-megatron-fsdp", "paci does not model Megatron-LM's FSDP"},
  };
  for (const auto& [flags, why] : cases) {
    const std::string e = megatron_error(flags);
    EXPECT_THAT(e, HasSubstr(why)) << flags;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
  // --account-for-*: the embedding counts as a layer of the split into virtual stages too.
  const ReadLaunch v = read_megatron(
      "--num-layers 31 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024 --bf16 "
      "--vocab-size 50257 --micro-batch-size 1 --global-batch-size 8 "
      "--pipeline-model-parallel-size 4 --account-for-embedding-in-pipeline-split "
      "--num-layers-per-virtual-pipeline-stage 4",
      on_h100(4));
  EXPECT_EQ(v.config.chunks, 2);
  EXPECT_EQ(std::accumulate(v.config.partition.begin(), v.config.partition.end(), 0), 31);
  // megatron-core's own attention core ("local") is unfused, as Transformer Engine's "unfused".
  EXPECT_FALSE(
      read_megatron(kLlama8b + "--attention-backend local", on_h100(16)).config.flash_attention);
  EXPECT_EQ(read_megatron(kLlama8b + "--use-distributed-optimizer", on_h100(16)).config.zero, 1);
  EXPECT_EQ(read_megatron(kLlama8b, on_h100(16)).config.zero, 0);
  // Context parallelism: its size and communication (one for every layer).
  const ReadLaunch cp = read_megatron(
      kLlama8b +
          "--tensor-model-parallel-size 2 --context-parallel-size 2 --cp-comm-type all_gather",
      on_h100(16));
  EXPECT_EQ(cp.config.cp, 2);
  EXPECT_TRUE(cp.config.cp_all_gather);
  EXPECT_EQ(cp.config.dp(), 4);
  EXPECT_FALSE(
      read_megatron(kLlama8b + "--context-parallel-size 2", on_h100(16)).config.cp_all_gather);
  EXPECT_THAT(megatron_error(kLlama8b, 0), HasSubstr("give 1 to 2^31 - 1 GPUs"));
}

// --- torchtitan ----------------------------------------------------------------------------------

TEST(InteropRead, TorchtitanReadsBackWhatPaciEmits) {
  std::vector<plan::PlanResult> plans = {
      test::plan_of("llama3-8b", "1f1b", 16, 2, 2),
      test::plan_of("llama3-70b", "interleaved", 64, 8, 4, 2),
      test::plan_of("llama3-70b", "gpipe", 64, 8, 2),
      test::plan_of("llama3-8b", "1f1b", 8, 1, 1),
  };
  plan::PlanResult uneven = test::plan_of("llama3-8b", "1f1b", 16, 4, 4);
  uneven.config.partition = {7, 9, 9, 7};
  uneven.config.recompute = plan::Recompute::none;
  uneven.config.tp_comm_overlap = true;
  uneven.config.global_batch = 64;
  plans.push_back(uneven);
  plan::PlanResult ddp = test::plan_of("llama3-8b", "1f1b", 8, 1, 1);
  ddp.config.zero = 0;
  plans.push_back(ddp);
  plan::PlanResult resharded = test::plan_of("llama3-70b", "1f1b", 64, 8, 2);
  resharded.config.zero = 3;
  plans.push_back(resharded);
  for (plan::PlanResult p : plans) {
    p.config.global_batch = p.config.pp > 1 ? p.config.global_batch : 64;
    // Without PP torchtitan's FSDP regathers the weights every micro-batch: ZeRO 3 (or DDP).
    if (p.config.pp == 1 && p.config.zero == 1) p.config.zero = 3;
    p.microbatches = p.config.microbatches();
    const std::string args = shell_join(torchtitan_args(p, ""));
    const ReadLaunch r = read_torchtitan(args, on_h100(p.config.gpus));
    plan::PlanConfig expected = p.config;
    // The ZeRO stage reads back as planned (FSDP resharded or not, or DDP); torchtitan overlaps
    // the reduction either way.
    expected.overlap_grad_reduce = p.config.dp() > 1;
    if (expected.pp == 1) expected.partition = {};
    plan::PlanConfig got = r.config;
    if (got.pp == 1) got.partition = {};
    EXPECT_EQ(knobs(got), knobs(expected)) << args;
  }
}

TEST(InteropRead, TorchtitanZeroBubbleCsvIsRecognised) {
  plan::PlanResult p = test::plan_of("llama3-8b", "zb-h1", 16, 2, 4);
  p.config.global_batch = 32;
  p.microbatches = p.config.microbatches();
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "paci-test-read-csv";
  std::filesystem::create_directories(dir);
  { std::ofstream(dir / "schedule.csv") << pytorch_csv(p.config); }
  const ReadLaunch r =
      read_torchtitan(shell_join(torchtitan_args(p, (dir / "schedule.csv").string())), on_h100(16));
  EXPECT_EQ(r.config.kind, "zb-h1");
  { std::ofstream(dir / "schedule.csv") << "F0,B0\n"; }
  EXPECT_THAT(torchtitan_error(shell_join(torchtitan_args(p, (dir / "schedule.csv").string()))),
              HasSubstr("is none of the schedules paci writes"));
  std::filesystem::remove_all(dir);
}

TEST(InteropRead, TorchtitanTakesTheConfigsValues) {
  // llama3_70b: tensor parallel 8, local batch 8, sequence 8192, full checkpointing.
  const ReadLaunch r = read_torchtitan("--module llama3 --config llama3_70b", on_h100(32));
  EXPECT_EQ(r.config.tp, 8);
  EXPECT_EQ(r.config.pp, 1);
  EXPECT_EQ(r.config.dp(), 4);
  EXPECT_EQ(r.config.global_batch, 32);
  EXPECT_EQ(r.config.model.seq_len, 8192);
  EXPECT_EQ(r.config.recompute, plan::Recompute::full);
  EXPECT_TRUE(r.config.sequence_parallel);
  // llama3_8b: selective checkpointing; its default split on 4 ranks (one layer fewer on the first
  // and last stage's weights: 34 effective layers, 9, 9, 8, 8).
  const ReadLaunch s = read_torchtitan(
      "--module llama3 --config llama3_8b --parallelism.pipeline-parallel-degree 4 "
      "--training.disable-cuda-graphs --training.local-batch-size 8",
      on_h100(8));
  EXPECT_EQ(s.config.recompute, plan::Recompute::selective);
  EXPECT_THAT(s.config.partition, ElementsAre(8, 9, 8, 7));
  // Interleaved1F1B: two stages a rank unless told.
  const ReadLaunch i = read_torchtitan(
      "--module llama3 --config llama3_8b --parallelism.pipeline-parallel-degree 2 "
      "--parallelism.pipeline-parallel-schedule Interleaved1F1B --training.disable-cuda-graphs "
      "--training.local-batch-size 4 activation-checkpoint:none",
      on_h100(2));
  EXPECT_EQ(i.config.kind, "interleaved");
  EXPECT_EQ(i.config.chunks, 2);
  EXPECT_EQ(i.config.recompute, plan::Recompute::none);
  EXPECT_EQ(std::accumulate(i.config.partition.begin(), i.config.partition.end(), 0), 32);
}

// The ZeRO stage torchtitan runs: its resharding policy (default: not with PP), or replicated.
TEST(InteropRead, TorchtitanZeroIsItsReshardingPolicy) {
  const std::string pp4 =
      "--module llama3 --config llama3_8b --parallelism.pipeline-parallel-degree 4 "
      "--training.disable-cuda-graphs --training.local-batch-size 8 ";
  EXPECT_EQ(read_torchtitan(pp4, on_h100(16)).config.zero, 1);
  EXPECT_EQ(read_torchtitan(pp4 + "--parallelism.fsdp-reshard-after-forward always", on_h100(16))
                .config.zero,
            3);
  EXPECT_EQ(read_torchtitan("--module llama3 --config llama3_8b", on_h100(8)).config.zero, 3);
  // Replicated beside TP: FSDP over a replicate x shard mesh with one shard, every replica whole.
  const ReadLaunch hsdp1 = read_torchtitan(
      "--module llama3 --config llama3_8b --parallelism.tensor-parallel-degree 2 "
      "--parallelism.data-parallel-replicate-degree 8 --parallelism.data-parallel-shard-degree 1",
      on_h100(16));
  EXPECT_EQ(hsdp1.config.zero, 0);
  // Context parallelism: all-gathered (PyTorch's SDPA dispatcher), FSDP over data x context.
  const ReadLaunch cp = read_torchtitan(
      "--module llama3 --config llama3_8b --parallelism.context-parallel-degree 2", on_h100(8));
  EXPECT_EQ(cp.config.cp, 2);
  EXPECT_TRUE(cp.config.cp_all_gather);
  EXPECT_EQ(cp.config.dp(), 4);
  EXPECT_EQ(cp.config.zero, 3);
  EXPECT_EQ(hsdp1.config.dp(), 8);
  // A schedule CSV that is no file: refused at once (torchtitan asks for a file), never read.
  EXPECT_THAT(torchtitan_error(pp4 + "--parallelism.pipeline-parallel-schedule-csv /dev/zero"),
              HasSubstr("is not a file"));
  EXPECT_THAT(torchtitan_error("--module llama3 --config llama3_8b "
                               "--parallelism.data-parallel-replicate-degree 4611686018427387904 "
                               "--parallelism.tensor-parallel-degree 4"),
              HasSubstr("up to 2^31 - 1"));
}

TEST(InteropRead, TorchtitanRefusalsAreOneLine) {
  const std::string base = "--module llama3 --config llama3_8b ";
  const std::pair<std::string, std::string> cases[] = {
      {"--parallelism.pipeline-parallel-degree 2", "add --training.disable-cuda-graphs"},
      {"--parallelism.tensor-parallel-degree 2 --compile.enable-async-tensor-parallel",
       "refuses async TP without --compile.enable"},
      {"--parallelism.expert-parallel-degree 2", "llama3-8b has no experts"},
      {"--parallelism.tensor-parallel-degree 3", "not divisible"},
      {"--parallelism.tensor-parallel-size 2", "torchtitan 0.3.0 has no option"},
      {"--parallelism.fsdp-reshard-after-forward sometimes", "takes one of default, always, never"},
      {"--parallelism.pipeline-parallel-degree 2 --training.disable-cuda-graphs "
       "--training.global-batch-size 16",
       "paci models one flush per step"},
      {"--parallelism.pipeline-parallel-degree 2 --training.disable-cuda-graphs "
       "--parallelism.pipeline-parallel-schedule ZBVZeroBubble",
       "paci models GPipe, 1F1B and Interleaved1F1B"},
      {"activation-checkpoint:sometimes", "is no option or subcommand"},
      {"activation-checkpoint:full --training.steps 5",
       "torchtitan 0.3.0 activation-checkpoint:full has no option"},
      {"--training.mixed-precision-param float32", "paci models bf16"},
  };
  for (const auto& [extra, why] : cases) {
    const std::string e = torchtitan_error(base + extra);
    EXPECT_THAT(e, HasSubstr(why)) << extra;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
  EXPECT_THAT(torchtitan_error("--config llama3_8b"),
              HasSubstr("--module and --config are missing"));
  EXPECT_THAT(torchtitan_error("--module llama3 --config llama3_405b"), HasSubstr("float8"));
  EXPECT_THAT(torchtitan_error("--module llama3 --config llama3_debugmodel"),
              HasSubstr("paci has torchtitan's llama3 llama3_8b and llama3_70b, qwen3 "
                        "qwen3_30b_a3b and deepseek_v3 deepseek_v3_671b recorded"));
  EXPECT_THAT(torchtitan_error("--module qwen3 --config llama3_8b"),
              HasSubstr("--module qwen3 --config llama3_8b: paci has"));
  EXPECT_THAT(torchtitan_error("--module deepseek_v3 --config deepseek_v3_16b"),
              HasSubstr("--module deepseek_v3 --config deepseek_v3_16b: paci has"));
  EXPECT_THAT(torchtitan_error("--module gpt_oss --config gpt_oss_20b"),
              HasSubstr("llama3, qwen3 and deepseek_v3 only"));
  // Expert parallelism borrows FSDP's shards and TP: 8 does not divide 4 shards (replicated 2).
  EXPECT_THAT(torchtitan_error("--module qwen3 --config qwen3_30b_a3b "
                               "--parallelism.pipeline-parallel-degree 2 "
                               "--parallelism.data-parallel-replicate-degree 2 "
                               "--parallelism.data-parallel-shard-degree 4 "
                               "--parallelism.expert-parallel-degree 8 "
                               "--parallelism.pipeline-parallel-microbatch-size 1 "
                               "--training.local-batch-size 4 --training.disable-cuda-graphs"),
              HasSubstr("(data_parallel_shard x cp x tp = 4), which --ep 8 does not divide"));
}

// torchtitan's Qwen3-30B-A3B: its config is paci's preset, its expert-parallel degree paci's e,
// and a plan with experts goes out and reads back the same.
TEST(InteropRead, TorchtitanQwen3ExpertsReadAndRoundTrip) {
  const ReadLaunch r = read_torchtitan(
      "--module qwen3 --config qwen3_30b_a3b --parallelism.pipeline-parallel-degree 2 "
      "--parallelism.expert-parallel-degree 8 --parallelism.pipeline-parallel-microbatch-size 1 "
      "--training.local-batch-size 4 --training.disable-cuda-graphs",
      on_h100(16));
  EXPECT_EQ(r.config.model.name, "qwen3-30b-a3b");
  EXPECT_EQ(r.config.model.experts, 128);
  EXPECT_EQ(r.config.ep, 8);
  EXPECT_EQ(r.config.pp, 2);
  EXPECT_EQ(r.config.dp(), 8);
  plan::PlanConfig c = r.config;
  const plan::PlanResult p = plan::evaluate(c);
  const ReadLaunch back = read_torchtitan(shell_join(torchtitan_args(p, "")), on_h100(16));
  EXPECT_EQ(back.config.ep, 8);
  EXPECT_EQ(back.config.model, r.config.model);
  // Mixtral has no torchtitan config: refused by name.
  c.model = plan::model_preset("mixtral-8x7b");
  EXPECT_THAT(torchtitan_refusal(c), HasSubstr("cannot train mixtral-8x7b"));
}

// torchtitan's DeepSeek-V3 671B: paci's preset without the multi-token-prediction module (its
// config builds none), the config's own expert-parallel degree (2) and interleaved schedule taken
// when the command line leaves them; a plan goes out and reads back the same model.
TEST(InteropRead, TorchtitanDeepSeekV3ReadAndRoundTrip) {
  const ReadLaunch r = read_torchtitan(
      "--module deepseek_v3 --config deepseek_v3_671b --parallelism.pipeline-parallel-degree 16 "
      "--parallelism.pipeline-parallel-schedule 1F1B --parallelism.expert-parallel-degree 8 "
      "--training.local-batch-size 32 activation-checkpoint:full",
      on_h100(256));
  EXPECT_EQ(r.config.model.name, "deepseek-v3 (modified)");
  EXPECT_EQ(r.config.model.mtp_layers, 0);
  EXPECT_EQ(r.config.model.router, plan::Router::deepseek_v3);
  EXPECT_EQ(r.config.ep, 8);
  EXPECT_EQ(r.config.pp, 16);
  plan::PlanConfig c = r.config;
  const plan::PlanResult p = plan::evaluate(c);
  const ReadLaunch back = read_torchtitan(shell_join(torchtitan_args(p, "")), on_h100(256));
  EXPECT_EQ(back.config.model, r.config.model);
  EXPECT_EQ(back.config.ep, 8);
  // Left alone, the config's expert-parallel degree is 2, and its schedule Interleaved1F1B, whose
  // two stages a rank torchtitan splits 61 layers (+1 +1 for the embedding and the head) into so
  // that on 16 ranks the last stage holds none: refused in one line.
  EXPECT_EQ(read_torchtitan("--module deepseek_v3 --config deepseek_v3_671b "
                            "--parallelism.pipeline-parallel-degree 8 "
                            "--training.local-batch-size 32",
                            on_h100(256))
                .config.ep,
            2);
  EXPECT_THAT(torchtitan_error("--module deepseek_v3 --config deepseek_v3_671b "
                               "--parallelism.pipeline-parallel-degree 16 "
                               "--training.local-batch-size 32"),
              HasSubstr("leaves stage 31 no transformer layer"));
}

TEST(InteropRead, OptionTablesAreTheRecordedOnes) {
  // 682 names recorded from Megatron-LM core_v0.16.1's parser, 120 options of torchtitan 0.3.0.
  EXPECT_NE(megatron_options().find("--pipeline-model-parallel-layout"), nullptr);
  EXPECT_EQ(megatron_options().find("--pipeline-model-parallel-layouts"), nullptr);
  const ToolOption* sp = torchtitan_options().find("--parallelism.no-enable-sequence-parallel");
  ASSERT_NE(sp, nullptr);
  EXPECT_TRUE(sp->negative);
  EXPECT_EQ(sp->name, "--parallelism.enable-sequence-parallel");
  ASSERT_NE(torchtitan_subcommand("activation-checkpoint:full"), nullptr);
  EXPECT_EQ(torchtitan_config("llama3_70b")->activation_checkpoint, "activation-checkpoint:full");
}

}  // namespace
}  // namespace paci::interop
