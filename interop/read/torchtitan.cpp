// read_torchtitan: torchtitan 0.3.0's command line (--module/--config and overrides; it reads no
// TOML file) as a plan configuration. What the command line leaves alone is the config's value, as
// recorded from torchtitan (interop/data). Its degrees, batch sizes, stage split and refusals as
// its own code has them: ParallelDims, Trainer.__init__ (batch sizes), _validate_cuda_graphs,
// CompileConfig.__post_init__, distributed/pipeline_parallel.py (_get_pipeline_metadata,
// _generate_llm_fqn_per_model_part).
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/errors.hpp"
#include "interop/pytorch.hpp"
#include "interop/read/launch.hpp"
#include "interop/read/options.hpp"
#include "interop/torchtitan.hpp"
#include "interop/words.hpp"
#include "schedules/generators.hpp"

namespace paci::interop {

namespace {

constexpr std::string_view kWhat = "--from-torchtitan";

[[noreturn]] void refuse(const std::string& why) {
  throw InputError(fmt::format("{}: {}", kWhat, why));
}

std::string json_text(const nlohmann::ordered_json& v) {
  if (v.is_null()) return "None";
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

struct Reader {
  std::vector<GivenOption> given;
  const nlohmann::ordered_json* config = nullptr;  // option -> the config's value
  std::string value(std::string_view name) const {
    if (const auto v = last_value(given, name)) return *v;
    const auto it = config->find(std::string(name));
    if (it == config->end()) throw std::logic_error(fmt::format("no recorded value for {}", name));
    return json_text(*it);
  }
  bool on(std::string_view name) const { return value(name) == "true"; }
  std::int64_t number(std::string_view name) const { return to_integer(value(name), name); }
  bool given_here(std::string_view name) const { return last_values(given, name).has_value(); }
};

// torchtitan's _generate_llm_fqn_per_model_part, counting the transformer layers of each stage.
std::vector<std::int32_t> generated_split(std::int64_t stages, std::int64_t layers,
                                          std::int64_t input_weight, std::int64_t output_weight) {
  if (stages < 1) refuse("torchtitan refuses fewer than one pipeline stage");
  if (stages == 1) return {static_cast<std::int32_t>(layers)};
  const std::int64_t effective = layers + input_weight + output_weight;
  if (stages > effective)
    refuse(fmt::format("torchtitan refuses {} stages for {} effective layers", stages, effective));
  const std::int64_t per = effective / stages, extra = effective % stages;
  if (input_weight > per || output_weight > per)
    refuse(
        fmt::format("torchtitan refuses the split: a first/last-stage-less-layers weight above "
                    "the {} layers a stage gets",
                    per));
  std::vector<std::int32_t> out;
  std::int64_t next = 0;
  for (std::int64_t s = 0; s < stages; ++s) {
    std::int64_t take = per + (s < extra ? 1 : 0);
    if (s == 0)
      take -= input_weight;
    else if (s == stages - 1)
      take -= output_weight;
    take = std::max<std::int64_t>(0, std::min(take, layers - next));
    next += take;
    out.push_back(static_cast<std::int32_t>(take));
  }
  if (next != layers)
    refuse(fmt::format("torchtitan's split leaves {} of the {} layers in no stage", layers - next,
                       layers));
  return out;
}

// --parallelism.module-fqns-per-model-part: each part's modules; the layers must run in order,
// the embedding first and the norm and head last, as paci places them.
std::vector<std::int32_t> parts_split(const std::vector<std::string>& parts, std::int64_t layers) {
  std::vector<std::int32_t> out;
  std::int64_t next = 0;
  for (std::size_t s = 0; s < parts.size(); ++s) {
    std::int32_t count = 0;
    std::stringstream modules(parts[s]);
    for (std::string m; std::getline(modules, m, ',');) {
      if (m == "tok_embeddings" && s == 0) continue;
      if ((m == "norm" || m == "lm_head" || m == "output") && s + 1 == parts.size()) continue;
      if (!m.starts_with("layers."))
        refuse(
            fmt::format("module-fqns-per-model-part: '{}' in stage {} is not where paci places "
                        "it (the embedding first, the norm and head last, layers.i between)",
                        m, s));
      const std::int64_t i = to_integer(std::string_view(m).substr(7), "a layer's index");
      if (i != next)
        refuse(
            fmt::format("module-fqns-per-model-part: layers.{} in stage {} is out of order "
                        "(paci's stages hold consecutive layers)",
                        i, s));
      ++next;
      ++count;
    }
    if (count == 0)
      refuse(fmt::format("module-fqns-per-model-part: stage {} holds no transformer layer", s));
    out.push_back(count);
  }
  if (next != layers)
    refuse(
        fmt::format("module-fqns-per-model-part names {} of the model's {} layers", next, layers));
  return out;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The largest schedule CSV read: far above any schedule's (a row per rank, an action a cell).
constexpr std::uintmax_t kCsvLimitBytes = std::uintmax_t{64} << 20;

// A schedule CSV: the kind whose PyTorch CSV paci writes equals it, for this configuration.
std::string csv_kind(const std::string& path, const plan::PlanConfig& base) {
  // torchtitan asks for a file (os.path.isfile); a device or a pipe would never end.
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    refuse(fmt::format("the schedule CSV {} is not a file", path));
  if (std::filesystem::file_size(path, ec) > kCsvLimitBytes)
    refuse(fmt::format("the schedule CSV {} is larger than {} MiB", path, kCsvLimitBytes >> 20));
  std::ifstream in(path);
  if (!in) refuse(fmt::format("the schedule CSV {} cannot be read", path));
  std::stringstream text;
  text << in.rdbuf();
  const auto trimmed = [](std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
    return s;
  };
  for (const char* kind : {"gpipe", "1f1b", "zb-h1", "zb-h2", "interleaved", "zb-v", "dualpipev"}) {
    plan::PlanConfig c = base;
    c.kind = kind;
    const bool several = c.kind == "interleaved" || v_shaped(c.kind);
    if (!several && c.chunks != 1) continue;
    if (c.kind == "interleaved" && c.chunks < 2) continue;
    if (v_shaped(c.kind) && c.chunks != 2) continue;
    if (!pytorch_refusal(c).empty()) continue;
    try {
      if (trimmed(pytorch_csv(c)) == trimmed(text.str())) return kind;
    } catch (const InputError&) {
    }
  }
  refuse(fmt::format(
      "the schedule CSV {} is none of the schedules paci writes for {} stages and "
      "{} micro-batches (gpipe, 1f1b, zb-h1, zb-h2, interleaved, zb-v, dualpipev); paci "
      "cannot "
      "predict another",
      path, base.stages(), base.microbatches()));
}

}  // namespace

ReadLaunch read_torchtitan(std::string_view text, const LaunchContext& context) {
  const LaunchWords words = split_launch(shell_split(text, kWhat), kWhat);
  ReadLaunch out;
  out.program = words.launcher;
  if (!words.program.empty()) out.program.push_back(words.program);
  // ConfigManager takes --module and --config out before tyro parses the rest.
  std::vector<std::string> rest;
  std::string module, config_name;
  for (std::size_t i = 0; i < words.options.size(); ++i) {
    const std::string& w = words.options[i];
    for (auto [flag, field] :
         {std::pair{"--module", &module}, std::pair{"--config", &config_name}}) {
      if (w == flag) {
        if (i + 1 >= words.options.size()) refuse(fmt::format("{} needs a value", flag));
        *field = words.options[++i];
        goto next;
      }
      if (w.starts_with(std::string(flag) + "=")) {
        *field = w.substr(std::string_view(flag).size() + 1);
        goto next;
      }
    }
    rest.push_back(w);
  next:;
  }
  if (module.empty() || config_name.empty())
    refuse(
        "--module and --config are missing (torchtitan needs both, e.g. --module llama3 "
        "--config llama3_8b)");
  if (module.starts_with("torchtitan.models.")) module = module.substr(18);
  if (module != "llama3" && module != "qwen3" && module != "deepseek_v3")
    refuse(fmt::format(
        "--module {}: paci has presets for torchtitan's llama3, qwen3 and deepseek_v3 only",
        module));
  if (config_name == "llama3_405b")
    refuse(
        fmt::format("--config llama3_405b trains its linear layers in float8 (torchtitan {}, "
                    "fixed when the config is built), and paci models bf16",
                    kTorchtitanVersion));
  const auto recorded = torchtitan_config(config_name);
  const std::string preset = config_name == "llama3_8b"          ? "llama3-8b"
                             : config_name == "llama3_70b"       ? "llama3-70b"
                             : config_name == "qwen3_30b_a3b"    ? "qwen3-30b-a3b"
                             : config_name == "deepseek_v3_671b" ? "deepseek-v3"
                                                                 : "";
  const bool deepseek = config_name == "deepseek_v3_671b";
  if (!recorded || preset.empty() || (module == "qwen3") != (config_name == "qwen3_30b_a3b") ||
      (module == "deepseek_v3") != deepseek)
    refuse(fmt::format(
        "--module {} --config {}: paci has torchtitan's llama3 llama3_8b and llama3_70b, "
        "qwen3 qwen3_30b_a3b and deepseek_v3 deepseek_v3_671b recorded "
        "(interop/data/torchtitan_options_{}.json)",
        module, config_name, kTorchtitanVersion));
  std::vector<std::string> sub_words;
  Reader r{parse_options(torchtitan_options(), rest, &sub_words), recorded->values};
  std::string checkpoint = recorded->activation_checkpoint;
  if (!sub_words.empty()) {
    checkpoint = sub_words.front();
    const OptionTable* sub = torchtitan_subcommand(checkpoint);
    if (!sub)
      refuse(
          fmt::format("'{}' is no option or subcommand of torchtitan {} (its subcommands: "
                      "activation-checkpoint:none|selective|full|memory-budget)",
                      checkpoint, kTorchtitanVersion));
    std::vector<std::string> after;
    parse_options(*sub, {sub_words.begin() + 1, sub_words.end()}, &after);
    if (!after.empty())
      refuse(fmt::format("'{}' after {}: torchtitan takes one subcommand, last", after.front(),
                         checkpoint));
  }

  plan::PlanConfig& c = out.config;
  c.cluster = context.cluster;
  c.gpus = launch_gpus(context, words, "torchtitan");
  c.model = plan::model_preset(preset);
  const std::int64_t preset_seq_len = c.model.seq_len;
  c.model.seq_len = r.number("--training.seq-len");
  // deepseek_v3_671b builds DeepSeek-V3 without its multi-token-prediction module.
  if (deepseek) c.model.mtp_layers = 0;
  if (c.model.seq_len != preset_seq_len || deepseek) c.model.name += " (modified)";
  // Expert parallelism borrows ranks from FSDP and TP; paci's experts are whole on each rank, as
  // torchtitan's. Checked with the rest by the plan (check_experts).
  c.ep = static_cast<std::int32_t>(r.number("--parallelism.expert-parallel-degree"));
  if (c.ep > 1 && c.model.experts == 0)
    refuse(fmt::format("--parallelism.expert-parallel-degree {}: {} has no experts", c.ep,
                       c.model.name));
  // Context parallelism: PyTorch's SDPA dispatcher all-gathers the keys and values.
  c.cp = static_cast<std::int32_t>(r.number("--parallelism.context-parallel-degree"));
  if (c.cp < 1) refuse("torchtitan refuses a context-parallel degree below 1");
  c.cp_all_gather = c.cp > 1;
  if (r.value("--training.mixed-precision-param") != "bfloat16")
    refuse("--training.mixed-precision-param float32: paci models bf16 mixed precision");
  if (r.on("--training.enable-cpu-offload"))
    refuse(
        "--training.enable-cpu-offload: paci does not model FSDP's host offloading of the weights, "
        "gradients and optimizer state");
  if (r.value("--training.mixed-precision-reduce") == "bfloat16")
    out.notes.push_back(
        "--training.mixed-precision-reduce bfloat16: paci models torchtitan's gradients as fp32 "
        "(FSDP's sharded gradients beside fp32 master weights), their reduction included");
  const std::int64_t replicate = r.number("--parallelism.data-parallel-replicate-degree");
  std::int64_t shard = r.number("--parallelism.data-parallel-shard-degree");
  c.tp = static_cast<std::int32_t>(r.number("--parallelism.tensor-parallel-degree"));
  c.pp = static_cast<std::int32_t>(r.number("--parallelism.pipeline-parallel-degree"));
  if (replicate < 1 || c.tp < 1 || c.pp < 1 || (shard < 1 && shard != -1))
    refuse("torchtitan refuses a parallel degree below 1 (data-parallel shard -1: the rest)");
  const std::int64_t others = replicate * c.tp * c.cp * c.pp;
  if (shard == -1) {
    if (c.gpus % others != 0)
      refuse(
          fmt::format("torchtitan refuses {} GPUs: not divisible by replicate {} × tensor {} × "
                      "context {} × pipeline {}",
                      c.gpus, replicate, c.tp, c.cp, c.pp));
    shard = c.gpus / others;
  }
  if (shard * others != c.gpus)
    refuse(
        fmt::format("torchtitan refuses the degrees: replicate {} × shard {} × tensor {} × "
                    "context {} × pipeline {} = {}, not the {} GPUs",
                    replicate, shard, c.tp, c.cp, c.pp, shard * others, c.gpus));
  // Replication beside TP or PP is FSDP over a replicate × shard mesh (HSDP, torchtitan 0.3.0's
  // llama3 parallelize); with a shard degree of 1 every replica holds everything: ZeRO 0. FSDP
  // shards over the data and the context-parallel GPUs together.
  if (shard * c.cp > 1) {
    // FSDP (torchtitan/distributed/fsdp.py): "default" reshards after forward without PP only.
    // Resharded, the weights are gathered for every micro-batch's forward and backward (ZeRO 3);
    // with PP and not resharded they stay whole through the step and the pipeline reduces the
    // gradients once, at its last backward (ZeRO 1 in paci's model).
    const std::string policy = r.value("--parallelism.fsdp-reshard-after-forward");
    const bool reshard = policy == "always" || (policy == "default" && c.pp == 1);
    c.zero = reshard || c.pp == 1 ? 3 : 1;
    if (!reshard && c.pp == 1)
      out.notes.push_back(
          "--parallelism.fsdp-reshard-after-forward never without PP: torchtitan gathers the "
          "weights once per micro-batch; paci's ZeRO 3 gathers them for the backward again");
    // HSDP: sharded over shard x context, those groups replicated.
    if (replicate > 1) c.shard_group = shard * c.cp;
  }
  // FSDP and DDP reduce during the backward.
  c.overlap_grad_reduce = shard * replicate * c.cp > 1;
  c.sequence_parallel = c.tp > 1 && r.on("--parallelism.enable-sequence-parallel");
  const bool compiled = r.on("--compile.enable");
  if (r.on("--compile.enable-async-tensor-parallel")) {
    if (!compiled || r.value("--compile.components").find("model") == std::string::npos)
      refuse(
          "torchtitan refuses async TP without --compile.enable and 'model' in "
          "--compile.components");
    c.tp_comm_overlap = c.tp > 1 && c.sequence_parallel;
  }
  if (c.pp > 1 && !r.on("--training.disable-cuda-graphs"))
    refuse(
        "torchtitan refuses CUDA graphs (on by default) with pipeline parallelism: add "
        "--training.disable-cuda-graphs");

  // The schedule, the stages per rank and the split (_get_pipeline_metadata).
  const std::int64_t local = r.number("--training.local-batch-size");
  std::int64_t global = r.number("--training.global-batch-size");
  const std::int64_t dp = replicate * shard;
  if (local < 1) refuse("--training.local-batch-size must be 1 or more");
  if (global < 0) global = local * dp;
  if (global == 0 || global % (local * dp) != 0)
    refuse(
        fmt::format("torchtitan refuses global batch {}: not a multiple of local batch {} × "
                    "data parallel {}",
                    global, local, dp));
  c.global_batch = global;
  const std::int64_t accumulation = global / (local * dp);
  if (c.pp > 1) {
    c.microbatch_size = r.number("--parallelism.pipeline-parallel-microbatch-size");
    if (c.microbatch_size < 1 || local % c.microbatch_size != 0)
      refuse(fmt::format("torchtitan refuses local batch {} for pipeline micro-batches of {}",
                         local, c.microbatch_size));
    if (accumulation > 1)
      refuse(
          fmt::format("global batch {} is {} accumulation steps of local batch {} × data "
                      "parallel {}, each a pipeline flush; paci models one flush per step "
                      "(raise --training.local-batch-size instead)",
                      global, accumulation, local, dp));
  } else {
    c.microbatch_size = local;
  }
  const std::string schedule = r.value("--parallelism.pipeline-parallel-schedule");
  const std::string csv = r.value("--parallelism.pipeline-parallel-schedule-csv");
  const bool multi = lower(schedule) == "interleaved1f1b";
  if (c.pp > 1 && csv.empty() && !multi && lower(schedule) != "gpipe" && lower(schedule) != "1f1b")
    refuse(
        fmt::format("--parallelism.pipeline-parallel-schedule {}: paci models GPipe, 1F1B and "
                    "Interleaved1F1B by name, zero-bubble H1/H2 from paci's CSV",
                    schedule));
  std::int64_t stages = c.pp;
  const auto parts = last_values(r.given, "--parallelism.module-fqns-per-model-part");
  std::vector<std::int32_t> split;
  if (c.pp > 1 && parts && !parts->empty() && parts->front() != "None") {
    split = parts_split(*parts, c.model.layers);
    stages = static_cast<std::int64_t>(split.size());
  } else if (c.pp > 1) {
    const std::int64_t in = r.number("--parallelism.pipeline-parallel-first-stage-less-layers");
    const std::int64_t outw = r.number("--parallelism.pipeline-parallel-last-stage-less-layers");
    const std::string per = r.value("--parallelism.pipeline-parallel-layers-per-stage");
    if (per != "None") {
      const std::int64_t lps = to_integer(per, "--parallelism.pipeline-parallel-layers-per-stage");
      if (lps < 1) refuse("--parallelism.pipeline-parallel-layers-per-stage must be 1 or more");
      stages = (c.model.layers + in + outw + lps - 1) / lps;
    } else {
      stages = c.pp * (multi ? 2 : 1);
    }
    split = generated_split(stages, c.model.layers, in, outw);
  }
  if (c.pp > 1) {
    if (stages % c.pp != 0)
      refuse(fmt::format("torchtitan refuses {} stages on {} pipeline ranks (not divisible)",
                         stages, c.pp));
    const std::int64_t per_rank = stages / c.pp;
    if (!multi && csv.empty() && per_rank != 1)
      refuse(fmt::format("torchtitan's {} runs one stage per rank, not {}", schedule, per_rank));
    if (multi && per_rank < 2)
      refuse("torchtitan's Interleaved1F1B needs at least two stages per rank");
    for (std::size_t k = 0; k < split.size(); ++k)
      if (split[k] < 1)
        refuse(fmt::format(
            "torchtitan's split of {} layers into {} stages leaves stage {} no transformer layer; "
            "paci's stages hold at least one: give --parallelism.module-fqns-per-model-part, or "
            "fewer stages",
            c.model.layers, split.size(), k));
    c.chunks = static_cast<std::int32_t>(per_rank);
    c.partition = split;
    c.kind = multi ? "interleaved" : lower(schedule) == "gpipe" ? "gpipe" : "1f1b";
    if (!csv.empty()) c.kind = csv_kind(csv, c);
  }
  if (checkpoint == "activation-checkpoint:memory-budget")
    refuse("activation-checkpoint:memory-budget: paci models no, selective or full recomputation");
  c.recompute = checkpoint == "activation-checkpoint:full"        ? plan::Recompute::full
                : checkpoint == "activation-checkpoint:selective" ? plan::Recompute::selective
                                                                  : plan::Recompute::none;
  if (c.recompute == plan::Recompute::selective)
    out.notes.push_back(
        "torchtitan's selective checkpointing saves chosen ops' outputs; paci "
        "predicts it as Megatron-LM's selective recomputation (the attention core)");
  if (sub_words.empty())
    out.notes.push_back(fmt::format("activation checkpointing: {}'s {}", config_name, checkpoint));
  if (const std::string why = torchtitan_refusal(c); !why.empty()) refuse(why);
  plan::check_config(c);
  return out;
}

}  // namespace paci::interop
