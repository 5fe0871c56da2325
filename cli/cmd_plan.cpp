// paci plan — a training run on a GPU cluster, simulated. A model (preset or shape), a GPU (preset
// or --cluster FILE) and the knobs: a knob given one value is fixed, a list is searched, an absent
// one is searched over its whole range (plan/search/search.hpp). Every knob fixed: that
// configuration with its best partition (plan/evaluate/evaluate.hpp), which may not fit (said, not
// an error). Prints, and writes JSON, a Chrome trace, the files paci simulate replays, the frontier
// and launch flags.
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>

#include "cli/common.hpp"
#include "cli/load.hpp"
#include "interop/launch.hpp"
#include "interop/read/compare.hpp"
#include "interop/tool.hpp"
#include "plan/cpu/cpu.hpp"
#include "plan/evaluate/evaluate.hpp"
#include "plan/hardware/cluster.hpp"
#include "plan/report/report.hpp"
#include "plan/search/search.hpp"
#include "plan/shapes/model.hpp"
#include "schedules/formats.hpp"
#include "traces/chrome_trace.hpp"

namespace paci::cli {

namespace {

std::atomic<bool> interrupted{false};

extern "C" void on_interrupt(int) {
  interrupted = true;
}

// "1,2,8" -> {1, 2, 8}: whole numbers in [1, at_most]; empty when the flag is absent.
template <typename T>
std::vector<T> numbers(const po::variables_map& vm, const char* flag, long long at_most) {
  if (!vm.count(flag)) return {};
  return parse_counts<T>(vm[flag].as<std::string>(), flag, at_most);
}

constexpr const char* kGiveGpu =
    "give the GPU: --gpu a100-40gb|a100-80gb|h100-80gb|h200|b200|gb200-nvl72, or --cluster FILE";

// A switch: absent searched (off and on, as every current run may turn it on); bare on; on, off,
// or both (on,off: searched).
std::vector<bool> switch_values(const po::variables_map& vm, const char* name) {
  if (!vm.count(name)) return {false, true};
  std::vector<bool> out;
  for (const std::string& v : split_commas(vm[name].as<std::string>())) {
    if (v != "on" && v != "off")
      throw UsageError(fmt::format("--{} takes on, off or on,off, got '{}'", name, v));
    if (std::find(out.begin(), out.end(), v == "on") == out.end()) out.push_back(v == "on");
  }
  return out;
}

plan::SearchSpace space_from(const po::variables_map& vm, const std::string& cluster_text) {
  plan::ModelOverrides o;
  const auto number = [&](const char* flag, std::optional<std::int64_t>& field) {
    if (vm.count(flag)) field = vm[flag].as<std::int64_t>();
  };
  number("layers", o.layers);
  number("d-model", o.d_model);
  number("heads", o.heads);
  number("kv-heads", o.kv_heads);
  number("ffn", o.ffn);
  number("vocab", o.vocab);
  number("seq-len", o.seq_len);
  number("experts", o.experts);
  number("top-k", o.top_k);
  number("shared-expert-ffn", o.shared_expert_ffn);
  number("head-dim", o.head_width);
  number("dense-layers", o.dense_layers);
  number("dense-ffn", o.dense_ffn);
  number("q-lora-rank", o.q_lora_rank);
  number("kv-lora-rank", o.kv_lora_rank);
  number("rope-head-dim", o.rope_head_width);
  number("mtp-layers", o.mtp_layers);
  if (vm.count("arch")) o.arch = plan::parse_arch(vm["arch"].as<std::string>());
  if (vm.count("router")) o.router = plan::parse_router(vm["router"].as<std::string>());
  if (vm.count("tied-embeddings")) {
    const std::string v = vm["tied-embeddings"].as<std::string>();
    if (v != "yes" && v != "no")
      throw UsageError(fmt::format("--tied-embeddings takes yes or no, got '{}'", v));
    o.tied_embeddings = v == "yes";
  }
  plan::SearchSpace s;
  s.model = plan::resolve_model(
      vm.count("preset") ? std::optional(vm["preset"].as<std::string>()) : std::nullopt, o);
  if (vm.count("gpu") && vm.count("cluster"))
    throw UsageError("--gpu and --cluster cannot be combined (a cluster file names its GPU)");
  if (vm.count("cluster"))
    s.cluster = plan::parse_cluster(cluster_text, vm["cluster"].as<std::string>() == "-"
                                                      ? "<stdin>"
                                                      : vm["cluster"].as<std::string>());
  else if (vm.count("gpu"))
    s.cluster = plan::cluster_preset(vm["gpu"].as<std::string>());
  else
    throw UsageError(kGiveGpu);
  for (const char* flag : {"gpus", "global-batch"})
    if (!vm.count(flag)) throw UsageError(fmt::format("--{} is missing", flag));
  s.gpus = vm["gpus"].as<std::int64_t>();
  s.global_batch = vm["global-batch"].as<std::int64_t>();
  s.tp = numbers<std::int32_t>(vm, "tp", 1 << 20);
  s.pp = numbers<std::int32_t>(vm, "pp", 1 << 20);
  s.cp = numbers<std::int32_t>(vm, "cp", 1 << 20);
  s.ep = numbers<std::int32_t>(vm, "ep", 1 << 20);
  if (!s.ep.empty() && !s.model.moe())
    throw UsageError(fmt::format(
        "--ep spreads a model's experts: {} has none (--experts E makes a mixture of experts)",
        s.model.name));
  if (vm.count("expert-load")) {
    s.expert_load = vm["expert-load"].as<double>();
    if (!(s.expert_load >= 1.0) || !std::isfinite(s.expert_load))
      throw UsageError(fmt::format(
          "--expert-load {} is the busiest GPU's routed tokens over the mean: it is at least 1",
          s.expert_load));
    if (!s.model.moe())
      throw UsageError(
          fmt::format("--expert-load needs a model with experts; {} has none", s.model.name));
  }
  if (vm.count("cp-comm")) {
    s.cp_all_gather.clear();
    for (const std::string& v : split_commas(vm["cp-comm"].as<std::string>())) {
      if (v != "p2p" && v != "all-gather")
        throw UsageError(
            fmt::format("--cp-comm takes p2p, all-gather or p2p,all-gather, got '{}'", v));
      if (std::find(s.cp_all_gather.begin(), s.cp_all_gather.end(), v == "all-gather") ==
          s.cp_all_gather.end())
        s.cp_all_gather.push_back(v == "all-gather");
    }
  }
  s.microbatch_size = numbers<std::int64_t>(vm, "microbatch-size", 1 << 30);
  s.chunks = numbers<std::int32_t>(vm, "chunks", 1 << 20);
  if (vm.count("kind")) s.kinds = split_commas(vm["kind"].as<std::string>());
  if (vm.count("recompute"))
    for (const std::string& r : split_commas(vm["recompute"].as<std::string>()))
      s.recompute.push_back(plan::parse_recompute(r));
  s.sequence_parallel = switch_values(vm, "sequence-parallel");
  s.tp_comm_overlap = switch_values(vm, "tp-comm-overlap");
  if (vm.count("zero") && vm.count("distributed-optimizer"))
    throw UsageError(
        "--zero and --distributed-optimizer cannot be combined (--distributed-optimizer is "
        "--zero 1, off --zero 0)");
  if (vm.count("zero")) {
    s.zero.clear();
    for (const std::string& v : split_commas(vm["zero"].as<std::string>())) {
      if (v.size() != 1 || v[0] < '0' || v[0] > '3')
        throw UsageError(fmt::format("--zero takes 0, 1, 2 or 3 (or a list), got '{}'", v));
      if (std::find(s.zero.begin(), s.zero.end(), v[0] - '0') == s.zero.end())
        s.zero.push_back(v[0] - '0');
    }
  } else if (vm.count("distributed-optimizer")) {
    s.zero.clear();
    for (const bool on : switch_values(vm, "distributed-optimizer")) s.zero.push_back(on ? 1 : 0);
  }
  if (vm.count("shard-group")) {
    s.shard_group = numbers<std::int64_t>(vm, "shard-group", std::int64_t{1} << 40);
    if (std::find(s.zero.begin(), s.zero.end(), 0) != s.zero.end() && s.zero.size() == 1)
      throw UsageError("--shard-group is the group ZeRO shards over: it needs --zero 1, 2 or 3");
  }
  s.overlap_grad_reduce = switch_values(vm, "overlap-grad-reduce");
  if (vm.count("overlap-p2p")) {
    const std::string v = vm["overlap-p2p"].as<std::string>();
    if (v != "on" && v != "off")
      throw UsageError(fmt::format(
          "--overlap-p2p takes on or off, got '{}' (absent: what the schedule's runtime does)", v));
    s.overlap_p2p = v == "on";
  }
  if (vm.count("offload-layers")) {
    s.offload_layers.clear();
    for (const std::string& v : split_commas(vm["offload-layers"].as<std::string>())) {
      const std::int32_t n =
          v == "0" ? 0 : parse_counts<std::int32_t>(v, "offload-layers", 1 << 20).front();
      if (std::find(s.offload_layers.begin(), s.offload_layers.end(), n) == s.offload_layers.end())
        s.offload_layers.push_back(n);
    }
  }
  const std::string attention = vm["attention"].as<std::string>();
  if (attention != "flash" && attention != "unfused")
    throw UsageError(fmt::format("--attention takes flash or unfused, got '{}'", attention));
  s.flash_attention = attention == "flash";
  s.precision = plan::parse_precision(vm["precision"].as<std::string>());
  plan::check_precision(s.cluster, s.precision);
  const std::string grads = vm["grad-dtype"].as<std::string>();
  if (grads != "fp32" && grads != "bf16")
    throw UsageError(fmt::format("--grad-dtype takes fp32 or bf16, got '{}'", grads));
  s.bf16_gradients = grads == "bf16";
  const std::string fp8_weights = vm["fp8-param-gather"].as<std::string>();
  if (fp8_weights != "on" && fp8_weights != "off")
    throw UsageError(fmt::format("--fp8-param-gather takes on or off, got '{}'", fp8_weights));
  s.fp8_params = fp8_weights == "on";
  if (s.fp8_params && s.precision == plan::Precision::bf16)
    throw InputError(
        "--fp8-param-gather keeps the FP8 GEMMs' weights in 8 bits: it needs --precision fp8 or "
        "mxfp8");
  const std::string moments = vm["moments-dtype"].as<std::string>();
  if (moments != "fp32" && moments != "bf16")
    throw UsageError(fmt::format("--moments-dtype takes fp32 or bf16, got '{}'", moments));
  s.bf16_moments = moments == "bf16";
  s.partition = numbers<std::int32_t>(vm, "partition", 1 << 20);
  return s;
}

// The best plan's files in DIR (and its trace at --trace).
void write_files(const po::variables_map& vm, const plan::PlanResult& best, const SimResult& sim,
                 const ordered_json& document, const std::vector<plan::PlanResult>& frontier) {
  const Timeline timeline = plan::plan_timeline(best, sim);
  if (vm.count("trace")) write_chrome_trace(timeline, vm["trace"].as<std::string>());
  if (!vm.count("output")) return;
  const std::string dir = vm["output"].as<std::string>();
  std::vector<std::string> notes = {
      plan::write_plan_outputs(best, timeline, document, frontier, dir)};
  if (best.config.cluster.name != plan::kCpuClusterName)
    for (std::string& n : interop::write_launch_files(best, dir)) notes.push_back(std::move(n));
  if (!vm["quiet"].as<bool>())
    for (const std::string& note : notes)
      if (!note.empty()) std::cerr << "paci plan: note: " << note << '\n';
}

// paci plan --cluster FILE with a per-layer calibration: the CPU executor's plans.
int plan_cpu(const po::variables_map& vm, const plan::LayerCalibration& cal,
             plan::SearchOptions o) {
  std::istringstream cluster_flags(
      "gpu gpus tp cp cp-comm microbatch-size recompute sequence-parallel tp-comm-overlap "
      "overlap-p2p distributed-optimizer zero shard-group overlap-grad-reduce offload-layers "
      "attention "
      "precision grad-dtype fp8-param-gather moments-dtype emit jobs preset "
      "layers d-model heads kv-heads head-dim ffn vocab seq-len arch tied-embeddings experts top-k "
      "shared-expert-ffn dense-layers dense-ffn q-lora-rank kv-lora-rank rope-head-dim mtp-layers "
      "router ep "
      "expert-load");
  for (std::string flag; cluster_flags >> flag;)
    if (given(vm, flag.c_str()))
      throw UsageError(fmt::format(
          "--{} does not apply to a CPU plan (--cluster {} is a per-layer calibration: its model "
          "and this machine are fixed)",
          flag, vm["cluster"].as<std::string>()));
  plan::CpuSpace space;
  space.calibration = cal;
  const std::int64_t global_batch =
      vm.count("global-batch") ? vm["global-batch"].as<std::int64_t>() : 8 * cal.batch;
  if (global_batch < 1 || global_batch % cal.batch != 0)
    throw UsageError(fmt::format(
        "--global-batch {} must be a multiple of the calibrated micro-batch, {} sequences",
        global_batch, cal.batch));
  space.microbatches = global_batch / cal.batch;
  space.pp = numbers<std::int32_t>(vm, "pp", 1 << 10);
  space.chunks = numbers<std::int32_t>(vm, "chunks", 1 << 10);
  space.partition = numbers<std::int32_t>(vm, "partition", 1 << 20);
  if (vm.count("kind")) space.kinds = split_commas(vm["kind"].as<std::string>());
  if (!(o.memory_limit_bytes > 0)) o.memory_limit_bytes = plan::machine_memory_bytes();
  const plan::SearchResult r = plan::search_cpu(space, o);
  const plan::SearchSpace shown = plan::cpu_search_space(cal, o.memory_limit_bytes, global_batch);
  const ordered_json document = plan::search_document(r, shown, o.max_staleness);
  if (vm.count("json")) write_output(vm["json"].as<std::string>(), document.dump(2) + "\n");
  const bool quiet = vm["quiet"].as<bool>();
  if (!quiet) std::cout << plan::search_text(r, shown);
  if (r.plans.empty()) throw InputError(plan::nothing_fits(r));
  if (!quiet) std::cout << "run the best: " << plan::train_command(r.plans.front(), 20) << "\n";
  if (vm.count("trace") || vm.count("output")) {
    SimResult sim;
    const plan::PlanResult best = plan::evaluate_cpu(cal, r.plans.front().config, {true}, sim);
    write_files(vm, best, sim, document, r.frontier);
  }
  return r.interrupted ? 130 : 0;
}

// paci plan --from-megatron FLAGS | --from-torchtitan ARGS: the launch predicted, the best plan
// for the same model, GPUs and batch that the same tool runs, and the walk between them.
int plan_from_launch(const po::variables_map& vm, const std::string& cluster_text, double limit) {
  const bool megatron = vm.count("from-megatron");
  const char* flag = megatron ? "from-megatron" : "from-torchtitan";
  if (vm.count("from-megatron") && vm.count("from-torchtitan"))
    throw UsageError("--from-megatron and --from-torchtitan cannot be combined");
  // What the launch sets, and --max-staleness: the tools run flushed schedules (staleness 0).
  std::istringstream launch_flags(
      "preset layers d-model heads kv-heads head-dim ffn seq-len arch tied-embeddings global-batch "
      "tp cp "
      "cp-comm pp "
      "microbatch-size kind chunks recompute partition sequence-parallel tp-comm-overlap "
      "overlap-p2p distributed-optimizer zero shard-group overlap-grad-reduce offload-layers "
      "attention "
      "precision grad-dtype fp8-param-gather moments-dtype max-staleness experts top-k "
      "shared-expert-ffn dense-layers dense-ffn q-lora-rank kv-lora-rank rope-head-dim mtp-layers "
      "router ep "
      "expert-load");
  for (std::string f; launch_flags >> f;)
    if (given(vm, f.c_str()))
      throw UsageError(fmt::format("--{} does not apply with --{}: {}", f, flag,
                                   f == "max-staleness"
                                       ? "the tools run flushed schedules, searched at staleness 0"
                                       : "the launch sets it"));
  std::string text = vm[flag].as<std::string>();
  if (text.starts_with("@")) text = read_input(text.substr(1));
  interop::LaunchContext context;
  if (vm.count("gpu") && vm.count("cluster"))
    throw UsageError("--gpu and --cluster cannot be combined (a cluster file names its GPU)");
  if (vm.count("cluster"))
    context.cluster = plan::parse_cluster(cluster_text, vm["cluster"].as<std::string>());
  else if (vm.count("gpu"))
    context.cluster = plan::cluster_preset(vm["gpu"].as<std::string>());
  else
    throw UsageError(kGiveGpu);
  if (vm.count("gpus")) context.gpus = vm["gpus"].as<std::int64_t>();
  if (vm.count("vocab")) context.vocab = vm["vocab"].as<std::int64_t>();
  const interop::Tool tool = megatron ? interop::Tool::megatron : interop::Tool::torchtitan;
  std::optional<interop::Tool> emitter;
  if (vm.count("emit")) emitter = interop::parse_tool(vm["emit"].as<std::string>());
  plan::SearchOptions o;
  o.memory_limit_bytes = limit;
  o.top = vm["top"].as<std::size_t>();
  o.jobs = vm["jobs"].as<std::size_t>();
  o.interrupted = &interrupted;
  const auto previous = std::signal(SIGINT, on_interrupt);
  const interop::LaunchComparison c = interop::compare_launch(tool, text, context, emitter, o);
  std::signal(SIGINT, previous);
  const plan::SearchResult& r = c.search;
  const bool quiet = vm["quiet"].as<bool>();
  if (!quiet) std::cout << interop::launch_text(c);
  if (!c.best) {  // the launch's prediction above, then why nothing better: one line, exit 2
    if (r.interrupted) return 130;
    throw InputError(
        fmt::format("no plan {} runs fits: {}", interop::to_string(c.runs), plan::nothing_fits(r)));
  }
  const plan::PlanResult& best = *c.best;
  if (!quiet) std::cout << plan::gap_text(c.mine, best, c.walk);
  ordered_json document = plan::search_document(r, c.space, 0);
  document["launch"] = interop::launch_json(c);
  if (vm.count("json")) write_output(vm["json"].as<std::string>(), document.dump(2) + "\n");
  if (vm.count("trace") || vm.count("output")) {
    SimResult sim;
    plan::PlanResult shown = plan::evaluate(best.config, {true}, sim);
    shown.memory_limit_bytes = r.memory_limit_bytes;
    shown.fits = true;
    write_files(vm, shown, sim, document, r.frontier);
  }
  if (emitter)
    std::cout << interop::emit(*emitter, best,
                               vm.count("output") ? vm["output"].as<std::string>() : "");
  return r.interrupted ? 130 : 0;
}

}  // namespace

int run_plan(const std::vector<std::string>& args) {
  po::options_description model("model (a preset; shape flags override it, or give the shape)");
  auto add_model = model.add_options();
  add_model("preset", po::value<std::string>(),
            "gpt2-small|medium|large|xl, gpt3-125m ... gpt3-175b, llama2-7b|13b|70b, "
            "llama3-8b|70b|405b, mixtral-8x7b|8x22b, qwen3-30b-a3b|235b-a22b, deepseek-v3 "
            "(docs/costmodel.md)");
  add_model("layers", po::value<std::int64_t>(), "transformer layers L");
  add_model("d-model", po::value<std::int64_t>(), "width h");
  add_model("heads", po::value<std::int64_t>(), "attention heads a");
  add_model("kv-heads", po::value<std::int64_t>(), "key-value heads g (default a)");
  add_model("head-dim", po::value<std::int64_t>(), "each head's width d (default h/a)");
  add_model("ffn", po::value<std::int64_t>(), "MLP width f (default 4h)");
  add_model("vocab", po::value<std::int64_t>(), "vocabulary V (default 50257)");
  add_model("seq-len", po::value<std::int64_t>(), "tokens per sequence s");
  add_model("arch", po::value<std::string>(), "gpt | llama (RMSNorm, SwiGLU, GQA, rotary)");
  add_model("tied-embeddings", po::value<std::string>(), "yes | no (default: gpt yes, llama no)");
  add_model("experts", po::value<std::int64_t>(),
            "a mixture of experts: E routed experts in every layer, each an MLP of width --ffn "
            "(default 0: dense)");
  add_model("top-k", po::value<std::int64_t>(), "experts each token is routed to (1..E)");
  add_model("router", po::value<std::string>(),
            "with experts: softmax (top-k, auxiliary loss; Megatron-LM's default) | deepseek-v3 "
            "(sigmoid, expert bias, 8 groups keeping 4); the cost is the same, the launch is not "
            "(default: the preset's, else softmax)");
  add_model("shared-expert-ffn", po::value<std::int64_t>(),
            "width of the shared experts every token passes (default 0: none)");
  add_model("dense-layers", po::value<std::int64_t>(),
            "with experts: the first N layers keep a dense MLP of width --dense-ffn (DeepSeek-V3: "
            "3; default 0)");
  add_model("dense-ffn", po::value<std::int64_t>(), "the dense layers' MLP width");
  add_model("kv-lora-rank", po::value<std::int64_t>(),
            "multi-head latent attention (MLA): the keys' and values' latent width (default 0: "
            "none)");
  add_model("q-lora-rank", po::value<std::int64_t>(),
            "MLA: the queries' latent width (default 0: queries projected from h)");
  add_model("rope-head-dim", po::value<std::int64_t>(),
            "MLA: rotary columns added to each query and key head (the key's shared)");
  add_model("mtp-layers", po::value<std::int64_t>(),
            "multi-token-prediction modules on the last stage (DeepSeek-V3: 1; default 0)");
  po::options_description cluster("cluster");
  auto add_cluster = cluster.add_options();
  add_cluster("gpu", po::value<std::string>(),
              "a100-40gb | a100-80gb | h100-80gb | h200 | b200 | gb200-nvl72 (72 GPUs on NVLink)");
  add_cluster("cluster", po::value<std::string>(),
              "your own cluster (docs/cluster.md), or this CPU: a paci calibrate --per-layer file "
              "(plans paci train's runs on 1, 2 or 4 stage threads)");
  add_cluster("gpus", po::value<std::int64_t>(), "GPUs in all");
  add_cluster("global-batch", po::value<std::int64_t>(), "sequences per optimizer step");
  po::options_description knobs(
      "knobs (one value: fixed; a comma list: searched; absent: searched over its whole range)");
  auto add_knob = knobs.add_options();
  add_knob("tp", po::value<std::string>(),
           "tensor-parallel degree t (range: divisors of GPUs/node)");
  add_knob(
      "cp", po::value<std::string>(),
      "context parallelism c: each sequence split over c GPUs beside the t of TP (range: t x c "
      "within the NVLink domain, 2c dividing the sequence; a given c may cross nodes)");
  add_knob(
      "cp-comm", po::value<std::string>(),
      "how context parallelism meets the other GPUs' keys and values: p2p (a ring, Megatron-LM "
      "/ Transformer Engine) | all-gather (Llama 3, PyTorch, torchtitan); absent: p2p "
      "(all-gather with --emit torchtitan)");
  add_knob("pp", po::value<std::string>(), "pipeline stages p (range: divisors of gpus/(t x c))");
  add_knob("ep", po::value<std::string>(),
           "expert parallelism e: each GPU of a group of e holds E/e whole experts, the tokens "
           "dispatched and combined by all-to-all (range, with experts: e dividing E and the t x "
           "c x d GPUs of a stage)");
  add_knob("expert-load", po::value<double>(),
           "the busiest GPU's routed tokens over the mean, >= 1 (default 1: balanced, as the "
           "published MoE benchmarks force it); not searched");
  add_knob("microbatch-size", po::value<std::string>(),
           "sequences per micro-batch b (range: divisors of global batch / d)");
  add_knob("kind", po::value<std::string>(),
           "gpipe | 1f1b | pipedream | 2bw | paci | zb-h1 | zb-h2 | interleaved | zb-v | dualpipev "
           "| dualpipe (range: all of them for a mixture of experts; for a dense model all but "
           "zb-v, dualpipev and dualpipe, searched when listed)");
  add_knob("chunks,v", po::value<std::string>(),
           "interleaved: model stages per device (range: v >= 2 with p·v dividing the layers, or "
           "the layers + 2: one fewer on the first and last stage)");
  add_knob("recompute", po::value<std::string>(), "none | selective | full (range: all three)");
  add_knob("partition", po::value<std::string>(),
           "layers per model stage, e.g. 20,20,20,20 (default: searched: the balanced one and "
           "the one smallest under the memory limit)");
  po::options_description switches("switches (absent: searched; bare: on; on,off: searched)");
  auto add_switch = switches.add_options();
  add_switch("sequence-parallel", po::value<std::string>()->implicit_value("on"),
             "sequence parallelism (t > 1); on | off | on,off (absent: searched)");
  add_switch("tp-comm-overlap", po::value<std::string>()->implicit_value("on"),
             "overlap the sequence-parallel collectives with their GEMMs (Transformer Engine); "
             "absent: searched");
  add_switch("zero", po::value<std::string>(),
             "ZeRO stage over the data-parallel replicas: 0 replicated | 1 optimizer state "
             "sharded (Megatron's distributed optimizer) | 2 and gradients | 3 and weights "
             "(FSDP); a list is searched; absent: 0,1,2,3");
  add_switch("shard-group", po::value<std::string>(),
             "HSDP: ZeRO shards over this many of the weights' d x c replicas (the nearest), the "
             "groups replicating one another; a list is searched; absent: all of them");
  add_switch("distributed-optimizer", po::value<std::string>()->implicit_value("on"),
             "--zero 1 (on) or 0 (off); on,off: both");
  add_switch("overlap-grad-reduce", po::value<std::string>()->implicit_value("on"),
             "reduce gradients during the last backward; absent: searched");
  add_switch("overlap-p2p", po::value<std::string>()->implicit_value("on"),
             "pipeline sends overlapped with compute (on) or waited on by the sender (off: "
             "Megatron-LM's --no-overlap-p2p-communication); absent: what the schedule's runtime "
             "does: off for 1f1b, on otherwise");
  add_switch("offload-layers", po::value<std::string>(),
             "activation offloading (Megatron-LM's --cpu-offloading-num-layers): the first N "
             "layers' activations kept in host memory from the forward to the backward; p = 1 "
             "without recomputation only; a list (0,40) is searched; absent: 0");
  add_switch("attention", po::value<std::string>()->default_value("flash"),
             "flash (FlashAttention) | unfused (Megatron's softmax kernels, s x s scores kept)");
  add_switch("precision", po::value<std::string>()->default_value("bf16"),
             "the linear layers' GEMMs: bf16 | fp8 (per-tensor scales: Transformer Engine's "
             "delayed scaling, torchao's float8) | mxfp8 (block-scaled, Blackwell); not searched");
  add_switch("grad-dtype", po::value<std::string>()->default_value("fp32"),
             "the gradient buffer and its data-parallel reduction: fp32 (Megatron-LM's default) | "
             "bf16 (--grad-reduce-in-bf16, NeMo's performance recipes); not searched");
  add_switch("fp8-param-gather",
             po::value<std::string>()->default_value("off")->implicit_value("on"),
             "FP8 weights: the FP8 GEMMs' weights kept and gathered in 8 bits, no bf16 copy "
             "(Megatron-LM's --fp8-param-gather; with --precision fp8|mxfp8 and ZeRO 1-3); not "
             "searched");
  add_switch("moments-dtype", po::value<std::string>()->default_value("fp32"),
             "AdamW's two moments: fp32 | bf16 (Megatron-LM's precision-aware optimizer, with "
             "ZeRO 1-3); not searched");
  po::options_description limits("constraints and output");
  auto add_out = limits.add_options();
  add_out("memory-limit", po::value<double>(),
          "GiB a GPU may use (default: its memory less a 4 GiB reserve for the framework)");
  add_out("max-staleness", po::value<std::int32_t>(),
          "most weight versions a backward may lag its forward (0: synchronous schedules only)");
  add_out("top", po::value<std::size_t>()->default_value(10), "plans listed");
  add_out("jobs,j", po::value<std::size_t>()->default_value(0, "every core"), "search threads");
  add_out("json", po::value<std::string>(), "write the plans (paci.plan/1)");
  add_out("trace", po::value<std::string>(), "Chrome trace of the best plan's simulated steps");
  add_out("output,o", po::value<std::string>(),
          "folder: the best plan's schedule.json, schedule.csv (PyTorch pipelining), "
          "costmodel.json, trace.json, plan.json; the frontier as JSON, CSV and a plot");
  add_out("emit", po::value<std::string>(),
          "print the best plan for a tool: pytorch (its schedule CSV) | megatron (flags) | "
          "torchtitan (arguments); the search keeps to what that tool runs");
  add_out("quiet,q", po::bool_switch(), "print nothing but --emit's");
  po::options_description launches(
      "a launch you already have (with --gpu or --cluster, and --gpus unless its torchrun says; "
      "@FILE reads it from FILE)");
  auto add_launch = launches.add_options();
  add_launch("from-megatron", po::value<std::string>(),
             "Megatron-LM pretrain_gpt.py flags (or the whole torchrun line): predicted, and the "
             "best plan Megatron-LM runs for the same model, GPUs and batch, with why");
  add_launch("from-torchtitan", po::value<std::string>(),
             "torchtitan 0.3.0's arguments (--module llama3 --config llama3_8b ...): the same");
  po::options_description all;
  all.add(model).add(cluster).add(knobs).add(switches).add(limits).add(launches);
  po::variables_map vm;
  if (!parse_options("plan",
                     "--preset NAME --gpu NAME --gpus N --global-batch B [--tp t --pp p "
                     "--microbatch-size b --kind K --recompute R ...: fixed, listed or searched] "
                     "[--max-staleness S] [--json R] [--trace T] [-o DIR] [--emit megatron]",
                     all, {}, args, vm))
    return 0;
  std::string cluster_text;
  if (vm.count("cluster")) cluster_text = read_input(vm["cluster"].as<std::string>());
  const bool cpu = plan::is_layer_calibration(cluster_text);
  const bool from_launch = vm.count("from-megatron") || vm.count("from-torchtitan");
  plan::SearchSpace space = cpu || from_launch ? plan::SearchSpace{} : space_from(vm, cluster_text);
  const bool quiet = vm["quiet"].as<bool>();
  double limit = 0;
  if (vm["jobs"].as<std::size_t>() > 1024)
    throw UsageError(
        fmt::format("--jobs must be 0 (every core) to 1024, got {}", vm["jobs"].as<std::size_t>()));
  if (vm.count("memory-limit")) {
    limit = vm["memory-limit"].as<double>() * 1024 * 1024 * 1024;
    if (!(limit > 0) || !std::isfinite(limit))
      throw UsageError("--memory-limit must be a positive number of GiB");
  }
  const std::int32_t max_staleness =
      vm.count("max-staleness") ? vm["max-staleness"].as<std::int32_t>() : -1;
  if (vm.count("max-staleness") && max_staleness < 0)
    throw UsageError("--max-staleness must be 0 or more");
  if (vm.count("from-megatron") || vm.count("from-torchtitan")) {
    if (cpu) throw UsageError("--from-megatron/--from-torchtitan plan a GPU cluster, not this CPU");
    return plan_from_launch(vm, cluster_text, limit);
  }
  if (cpu) {
    plan::SearchOptions o;
    o.memory_limit_bytes = limit;
    o.max_staleness = max_staleness;
    o.top = vm["top"].as<std::size_t>();
    o.interrupted = &interrupted;
    const auto previous = std::signal(SIGINT, on_interrupt);
    const int rc = plan_cpu(
        vm, plan::parse_layer_calibration(cluster_text, vm["cluster"].as<std::string>()), o);
    std::signal(SIGINT, previous);
    return rc;
  }
  std::optional<interop::Tool> emitter;
  if (vm.count("emit")) emitter = interop::parse_tool(vm["emit"].as<std::string>());
  const bool files = vm.count("trace") || vm.count("output");
  // torchtitan's context parallelism all-gathers (PyTorch's SDPA dispatcher): its search asks that.
  if (emitter == interop::Tool::torchtitan && !vm.count("cp-comm")) space.cp_all_gather = {true};

  if (const auto config = plan::single_configuration(space)) {
    if (emitter)  // before anything is printed or written
      if (const std::string why = interop::refusal(*emitter, *config); !why.empty())
        throw InputError(why);
    SimResult sim;
    const plan::PlanResult p = plan::evaluate_best_partition(*config, limit, {files}, sim);
    if (max_staleness >= 0 && p.max_staleness > max_staleness)
      throw InputError(fmt::format("{} is {} updates stale at most, above --max-staleness {}",
                                   p.config.kind, p.max_staleness, max_staleness));
    const ordered_json document = plan::plans_document({p});
    if (vm.count("json")) write_output(vm["json"].as<std::string>(), document.dump(2) + "\n");
    if (files) write_files(vm, p, sim, document, {p});
    if (!quiet) std::cout << plan::plan_text(p);
    if (emitter)
      std::cout << interop::emit(*emitter, p,
                                 vm.count("output") ? vm["output"].as<std::string>() : "");
    return 0;
  }

  // Every knob but the switches given: a tool that cannot run that configuration at any ZeRO
  // stage searched is refused before anything is printed or written.
  if (auto config = plan::fixed_but_switches(space); config && emitter) {
    std::string why;  // refused at every ZeRO stage searched: the first one's reason
    for (const std::int32_t zero : space.zero) {
      config->zero = config->dp() > 1 ? zero : 0;
      const std::string reason = interop::refusal(*emitter, *config);
      if (reason.empty()) {
        why.clear();
        break;
      }
      if (why.empty()) why = reason;
    }
    if (!why.empty()) throw InputError(why);
  }
  plan::SearchOptions o;
  o.memory_limit_bytes = limit;
  o.max_staleness = max_staleness;
  o.top = vm["top"].as<std::size_t>();
  o.jobs = vm["jobs"].as<std::size_t>();
  o.interrupted = &interrupted;
  if (emitter)
    o.runnable = [tool = *emitter](const plan::PlanConfig& c) { return interop::refusal(tool, c); };
  const bool progress = !quiet && isatty(STDERR_FILENO);
  if (progress)
    o.progress = [](const plan::SearchProgress& s) {
      if (s.seconds < 2) return;
      std::cerr << fmt::format("\rplan: {}/{} candidates, {:.0f} a second{}   ", s.done, s.total,
                               s.seconds > 0 ? static_cast<double>(s.done) / s.seconds : 0.0,
                               s.best_step_s ? fmt::format(", best {:.3f} s", *s.best_step_s) : "")
                << std::flush;
    };
  const auto previous = std::signal(SIGINT, on_interrupt);
  const plan::SearchResult r = plan::search(space, o);
  std::signal(SIGINT, previous);
  if (progress) std::cerr << "\r" << std::string(78, ' ') << "\r";
  const ordered_json document = plan::search_document(r, space, max_staleness);
  if (vm.count("json")) write_output(vm["json"].as<std::string>(), document.dump(2) + "\n");
  if (r.plans.empty()) throw InputError(plan::nothing_fits(r));  // one line, nothing printed
  if (!quiet) std::cout << plan::search_text(r, space);
  if (files) {  // the best plan again, with its timeline
    SimResult sim;
    plan::PlanResult best = plan::evaluate(r.plans.front().config, {true}, sim);
    best.memory_limit_bytes = r.memory_limit_bytes;
    best.fits = true;
    write_files(vm, best, sim, document, r.frontier);
  }
  if (emitter)
    std::cout << interop::emit(*emitter, r.plans.front(),
                               vm.count("output") ? vm["output"].as<std::string>() : "");
  return r.interrupted ? 130 : 0;
}

}  // namespace paci::cli
