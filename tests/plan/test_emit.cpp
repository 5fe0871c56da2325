// --emit: the best plan in Megatron-LM's flags and torchtitan's job config, with the option names
// of the releases docs/plan.md names (NVIDIA/Megatron-LM core_v0.19.0, pytorch/torchtitan v0.2.2);
// a schedule a tool cannot run is one line saying so.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "plan/emit.hpp"

namespace paci::plan {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

PlanResult plan_of(const std::string& kind, std::int32_t chunks = 1) {
  PlanConfig c;
  c.model = model_preset("llama3-70b");
  c.cluster = cluster_preset("h100-80gb");
  c.gpus = 256;
  c.global_batch = 512;
  c.tp = 8;
  c.pp = 4;
  c.chunks = chunks;
  c.microbatch_size = 1;
  c.kind = kind;
  c.recompute = Recompute::full;
  c.sequence_parallel = true;
  c.distributed_optimizer = true;
  c.overlap_grad_reduce = true;
  PlanResult p;
  p.config = c;
  p.config.partition = default_partition(c);
  return p;
}

TEST(PlanEmit, MegatronFlags) {
  const std::string f = emit(Emitter::megatron, plan_of("interleaved", 2));
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
                           "--attention-backend flash"})
    EXPECT_THAT(f, HasSubstr(flag)) << flag;
  EXPECT_THAT(f, HasSubstr("data parallel 8"));
  EXPECT_THAT(emit(Emitter::megatron, plan_of("1f1b")),
              Not(HasSubstr("--num-virtual-stages-per-pipeline-rank")));
  for (const char* kind : {"paci", "pipedream", "2bw", "zb-h1", "gpipe"}) {
    const std::string line = emit(Emitter::megatron, plan_of(kind));
    EXPECT_THAT(line, StartsWith("# Megatron-LM cannot run")) << kind;
    EXPECT_EQ(std::count(line.begin(), line.end(), '\n'), 1) << kind;
  }
}

TEST(PlanEmit, TorchtitanConfig) {
  const std::string t = emit(Emitter::torchtitan, plan_of("interleaved", 2));
  for (const char* key :
       {"[parallelism]", "tensor_parallel_degree = 8", "pipeline_parallel_degree = 4",
        "pipeline_parallel_schedule = \"Interleaved1F1B\"",
        "pipeline_parallel_layers_per_stage = 10", "pipeline_parallel_microbatch_size = 1",
        "data_parallel_shard_degree = 8", "[training]", "local_batch_size = 64",
        "global_batch_size = 512", "seq_len = 8192", "[activation_checkpoint]", "mode = \"full\""})
    EXPECT_THAT(t, HasSubstr(key)) << key;
  EXPECT_THAT(emit(Emitter::torchtitan, plan_of("zb-h1")),
              HasSubstr("pipeline_parallel_schedule_csv = \"schedule.csv\""));
  EXPECT_THAT(emit(Emitter::torchtitan, plan_of("gpipe")),
              HasSubstr("pipeline_parallel_schedule = \"GPipe\""));
  for (const char* kind : {"paci", "pipedream", "2bw"})
    EXPECT_THAT(emit(Emitter::torchtitan, plan_of(kind)), StartsWith("# torchtitan cannot run"))
        << kind;
  EXPECT_THROW(parse_emitter("deepspeed"), InputError);
}

}  // namespace
}  // namespace paci::plan
