// torchtitan_args: the plan as torchtitan 0.3.0's command line.
#include "interop/torchtitan.hpp"

#include <fmt/format.h>

#include "base/errors.hpp"
#include "interop/pytorch.hpp"
#include "schedules/generators.hpp"

namespace paci::interop {

std::pair<std::string, std::string> torchtitan_model(const plan::ModelSpec& m) {
  // A preset's shape at m's sequence length (--training.seq-len sets it) and under m's name.
  const auto shape_of = [&](const char* name) {
    plan::ModelSpec preset = plan::model_preset(name);
    preset.seq_len = m.seq_len;
    preset.name = m.name;
    return preset;
  };
  for (const char* name : {"llama3-8b", "llama3-70b", "llama3-405b"})
    if (m == shape_of(name))
      return {"llama3", fmt::format("llama3_{}", std::string_view(name).substr(7))};
  // Its only mixture of experts with a config (qwen3_235b_a22b has a model but no config).
  if (m == shape_of("qwen3-30b-a3b")) return {"qwen3", "qwen3_30b_a3b"};
  // DeepSeek-V3 (671B) as torchtitan's deepseek_v3_671b builds it: the same shape without the
  // multi-token-prediction module (its config leaves num_mtp_layers at 0; only the debug model's
  // config turns it on), so paci's preset with --mtp-layers 0.
  plan::ModelSpec deepseek = shape_of("deepseek-v3");
  deepseek.mtp_layers = 0;
  if (m == deepseek) return {"deepseek_v3", "deepseek_v3_671b"};
  return {"", ""};
}

std::string torchtitan_refusal(const plan::PlanConfig& c) {
  if (plan::asynchronous_kind(c.kind))
    return fmt::format(
        "torchtitan cannot run a {} schedule: PyTorch's pipelining ends every step with a flush "
        "and keeps one weight version",
        c.kind);
  if (c.copies() > 1)
    return fmt::format(
        "torchtitan {} cannot run a dualpipe schedule: its pipelining holds one copy of the "
        "model (its DualPipeV is the one-copy form: --kind dualpipev)",
        kTorchtitanVersion);
  if (torchtitan_model(c.model).first.empty())
    return fmt::format(
        "torchtitan {} cannot train {}{}: it builds models from its own configs (of paci's "
        "presets: llama3-8b, llama3-70b, llama3-405b, qwen3-30b-a3b, and deepseek-v3 with "
        "--mtp-layers 0)",
        kTorchtitanVersion, c.model.name,
        c.model.mtp_layers > 0 ? " with multi-token prediction" : "");
  if (c.bf16_moments)
    return fmt::format(
        "torchtitan {}'s AdamW keeps fp32 moments beside fp32 master weights: plan "
        "--moments-dtype fp32, or --emit megatron",
        kTorchtitanVersion);
  if (c.offload_layers > 0)
    return fmt::format(
        "torchtitan {} offloads no activations (its --training.enable-cpu-offload moves FSDP's "
        "weights, gradients and optimizer state to the host, not activations): plan "
        "--offload-layers 0, or --emit megatron",
        kTorchtitanVersion);
  if (c.bf16_gradients)
    return fmt::format(
        "paci's bf16 gradient buffer is Megatron-LM's (--grad-reduce-in-bf16); torchtitan {}'s "
        "FSDP "
        "keeps its sharded gradients in fp32 beside fp32 master weights: plan --grad-dtype fp32",
        kTorchtitanVersion);
  if (c.precision != plan::Precision::bf16)
    return fmt::format(
        "paci does not emit {} GEMMs for torchtitan {}: no option turns float8 on; only its config "
        "registry does (llama3_405b: torchao's rowwise float8; llama3_8b_mxfp8), and those "
        "converters refuse to build without an SM89 / SM100 GPU, so they are not checked; plan "
        "--precision bf16, or --emit megatron",
        plan::to_string(c.precision), kTorchtitanVersion);
  if (torchtitan_model(c.model).second == "llama3_405b")
    return fmt::format(
        "torchtitan {}'s llama3_405b trains its linear layers in float8 (torchao's Float8Linear, "
        "fixed when the config is built; no option turns it off), and paci plans bf16",
        kTorchtitanVersion);
  // torchtitan's data parallelism (docs/interop.md): replicated (ZeRO 0: DDP, or beside TP or PP
  // HSDP with a shard degree of 1), or FSDP: with PP the weights stay whole through the step
  // (ZeRO 1) or are resharded (3); without PP, ZeRO 3.
  // torchtitan's experts: EP borrows ranks from FSDP and TP (dp_shard x cp x tp = efsdp x ep;
  // ParallelismConfig.expert_parallel_degree), each expert whole (no expert TP).
  if (c.ep > 1) {
    const std::int64_t replicas =
        c.zero == 0 ? c.dp() : (c.shard_group > 0 ? c.dp() * c.cp / c.shard_group : 1);
    const std::int64_t dense = c.dp() / replicas * c.cp * c.tp;
    if (dense % c.ep != 0)
      return fmt::format(
          "torchtitan {}'s expert parallelism takes its ranks from FSDP's shards and TP "
          "(data_parallel_shard x cp x tp = {}), which --ep {} does not divide: plan an --ep "
          "dividing it, or ZeRO 1 or 3 without --shard-group",
          kTorchtitanVersion, dense, c.ep);
  }
  if (c.cp > 1 && !c.cp_all_gather)
    return fmt::format(
        "torchtitan {}'s context parallelism all-gathers the keys and values (PyTorch's SDPA "
        "dispatcher): plan --cp-comm all-gather",
        kTorchtitanVersion);
  if (c.cp > 1 && c.zero == 0)
    return "torchtitan shards over its context-parallel GPUs (FSDP over data x context): plan "
           "ZeRO 1 (with PP) or 3";
  if (c.zero > 0 && c.shard_group > 0 && c.shard_group % c.cp != 0)
    return fmt::format(
        "torchtitan's FSDP shards over its data x context-parallel GPUs (data_parallel_shard "
        "x cp): --shard-group {} must be a multiple of --cp {}",
        c.shard_group, c.cp);
  if (c.dp() * c.cp > 1) {
    if (c.zero == 2)
      return "torchtitan's FSDP has no ZeRO 2 (the gradients sharded, the weights whole): plan "
             "ZeRO 1 (with PP) or 3";
    if (c.zero == 1 && c.pp == 1)
      return "torchtitan without PP regathers the weights for every micro-batch (FSDP, ZeRO 3): "
             "plan ZeRO 3, or ZeRO 1 with PP";
  }
  return pytorch_refusal(c);
}

std::vector<std::string> torchtitan_module_parts(const plan::PlanConfig& c) {
  const std::vector<std::int32_t> layers =
      c.partition.empty() ? plan::default_partition(c) : c.partition;
  std::vector<std::string> parts;
  std::int32_t next = 0;
  for (std::size_t s = 0; s < layers.size(); ++s) {
    std::string part = s == 0 ? "tok_embeddings" : "";
    for (std::int32_t l = 0; l < layers[s]; ++l, ++next)
      part += fmt::format("{}layers.{}", part.empty() ? "" : ",", next);
    if (s + 1 == layers.size()) part += ",norm,lm_head";
    parts.push_back(std::move(part));
  }
  return parts;
}

std::string torchtitan_schedule(const plan::PlanConfig& c) {
  if (c.kind == "gpipe") return "GPipe";
  if (c.kind == "1f1b") return "1F1B";
  if (c.kind == "interleaved") return "Interleaved1F1B";
  return "";  // zero-bubble: paci's CSV
}

std::string torchtitan_activation_checkpoint(const plan::PlanConfig& c) {
  return fmt::format("activation-checkpoint:{}", plan::to_string(c.recompute));
}

std::vector<std::string> torchtitan_args(const plan::PlanResult& p, const std::string& csv) {
  const plan::PlanConfig& c = p.config;
  if (const std::string why = torchtitan_refusal(c); !why.empty()) throw InputError(why);
  const auto [module, config] = torchtitan_model(c.model);
  std::vector<std::string> a = {"--module", module, "--config", config};
  const auto add = [&](std::string option, auto value) {
    a.push_back(std::move(option));
    a.push_back(fmt::format("{}", value));
  };
  add("--parallelism.tensor-parallel-degree", c.tp);
  if (c.cp > 1) add("--parallelism.context-parallel-degree", c.cp);
  if (c.tp > 1 && !c.sequence_parallel) a.push_back("--parallelism.no-enable-sequence-parallel");
  add("--parallelism.pipeline-parallel-degree", c.pp);
  if (c.ep > 1) add("--parallelism.expert-parallel-degree", c.ep);
  // ZeRO 0 replicates (DDP alone, HSDP with one shard beside TP or PP); else torchtitan shards
  // (FSDP): ZeRO 3 reshards after forward, ZeRO 1 (with PP) does not.
  // HSDP: FSDP over shard_group of the data x context GPUs, replicated over the rest.
  const std::int64_t replicas =
      c.zero == 0 ? c.dp() : (c.shard_group > 0 ? c.dp() * c.cp / c.shard_group : 1);
  add("--parallelism.data-parallel-replicate-degree", replicas);
  add("--parallelism.data-parallel-shard-degree", c.dp() / replicas);
  if (c.dp() * c.cp > 1 && c.zero > 0)
    add("--parallelism.fsdp-reshard-after-forward", c.zero == 3 ? "always" : "never");
  if (c.pp > 1) {
    if (const std::string schedule = torchtitan_schedule(c); !schedule.empty())
      add("--parallelism.pipeline-parallel-schedule", schedule);
    else if (v_shaped(c.kind))
      // The V: torchtitan takes each rank's stages from the schedule's name (its V style for
      // ZBVZeroBubble and DualPipeV) and the order of their actions from paci's CSV.
      add("--parallelism.pipeline-parallel-schedule",
          c.kind == "zb-v" ? "ZBVZeroBubble" : "DualPipeV");
    if (torchtitan_schedule(c).empty()) add("--parallelism.pipeline-parallel-schedule-csv", csv);
    a.push_back("--parallelism.module-fqns-per-model-part");
    for (std::string& part : torchtitan_module_parts(c)) a.push_back(std::move(part));
    add("--parallelism.pipeline-parallel-microbatch-size", c.microbatch_size);
    a.push_back("--training.disable-cuda-graphs");  // torchtitan's CUDA graphs refuse PP
  }
  // With PP the local batch is the pipeline's (its micro-batches inside); without, each local
  // batch is one micro-batch and torchtitan accumulates M of them.
  add("--training.local-batch-size", c.pp > 1 ? c.global_batch / c.dp() : c.microbatch_size);
  add("--training.global-batch-size", c.global_batch);
  add("--training.seq-len", c.model.seq_len);
  add("--training.mixed-precision-param", "bfloat16");
  add("--training.mixed-precision-reduce", "float32");
  if (c.tp_comm_overlap) {  // asynchronous TP is a compiler pass
    a.push_back("--compile.enable");
    a.push_back("--compile.enable-async-tensor-parallel");
  }
  a.push_back(torchtitan_activation_checkpoint(c));  // a subcommand: last
  return a;
}

std::vector<std::pair<std::string, std::string>> torchtitan_env(const plan::PlanConfig&) {
  return {};
}

}  // namespace paci::interop
