// emit(): Megatron-LM flags and torchtitan TOML for a plan; plot_frontier(): matplotlib through
// python3 (posix_spawn, no shell).
#include "plan/emit.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <vector>

#include <fmt/ranges.h>

#include "schedules/ir.hpp"

extern char** environ;

namespace paci::plan {

namespace {

// The plot: step time against peak memory, one point per frontier plan, staleness as colour.
constexpr const char* kPlotScript = R"PY(
import csv, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rows = list(csv.DictReader(open(sys.argv[1])))
x = [float(r["peak_memory_bytes"]) / 2**30 for r in rows]
y = [float(r["step_s"]) for r in rows]
c = [int(r["max_staleness"]) for r in rows]
fig, ax = plt.subplots(figsize=(7, 4.5))
points = ax.scatter(x, y, c=c, cmap="viridis", s=36, edgecolors="black", linewidths=0.4)
for r, xi, yi in zip(rows, x, y):
    ax.annotate(f"{r['kind']} t{r['tp']} p{r['pp']} b{r['microbatch_size']}", (xi, yi),
                fontsize=6, xytext=(3, 3), textcoords="offset points")
ax.set_xlabel("peak memory per GPU (GiB)")
ax.set_ylabel("step time (s)")
ax.set_title("paci plan: the Pareto frontier")
fig.colorbar(points, ax=ax, label="max staleness (updates)")
fig.tight_layout()
fig.savefig(sys.argv[2])
)PY";

int run(const char* python, const std::string& csv, const std::string& svg) {
  std::vector<std::string> args = {python, "-c", kPlotScript, csv, svg};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // Its output goes nowhere: a python without matplotlib is tried, then the next one.
  posix_spawn_file_actions_t quiet;
  posix_spawn_file_actions_init(&quiet);
  posix_spawn_file_actions_addopen(&quiet, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&quiet, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, python, &quiet, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&quiet);
  if (spawned != 0) return -1;
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

Emitter parse_emitter(std::string_view text) {
  if (text == "megatron") return Emitter::megatron;
  if (text == "torchtitan") return Emitter::torchtitan;
  throw InputError(fmt::format("--emit takes megatron or torchtitan, got '{}'", text));
}

namespace {

bool even(const PlanResult& p) {
  const auto& layers = p.config.partition;
  return layers.empty() ||
         std::all_of(layers.begin(), layers.end(), [&](std::int32_t l) { return l == layers[0]; });
}

std::string megatron(const PlanResult& p) {
  const PlanConfig& c = p.config;
  const ModelSpec& m = c.model;
  if (c.kind != "1f1b" && c.kind != "interleaved")
    return fmt::format(
        "# Megatron-LM cannot run a {} schedule: it runs 1F1B and interleaved 1F1B only (no GPipe, "
        "zero-bubble or asynchronous schedule; core_v0.19.0)\n",
        c.kind);
  std::string f = fmt::format(
      "# paci plan -> Megatron-LM (option names of core_v0.19.0); launch on {} GPUs: data "
      "parallel {} = world size / (t x p)\n"
      "--tensor-model-parallel-size {} --pipeline-model-parallel-size {}",
      c.gpus, c.dp(), c.tp, c.pp);
  if (c.kind == "interleaved")
    f += fmt::format(" --num-virtual-stages-per-pipeline-rank {}", c.chunks);
  f += fmt::format(" --micro-batch-size {} --global-batch-size {}", c.microbatch_size,
                   c.global_batch);
  if (c.recompute == Recompute::selective) f += " --recompute-granularity selective";
  if (c.recompute == Recompute::full)
    f += " --recompute-granularity full --recompute-method uniform --recompute-num-layers 1";
  if (c.sequence_parallel) f += " --sequence-parallel";
  if (c.tp_comm_overlap) f += " --tp-comm-overlap";
  if (c.distributed_optimizer) f += " --use-distributed-optimizer";
  if (c.overlap_grad_reduce) f += " --overlap-grad-reduce";
  f += fmt::format(
      " --num-layers {} --hidden-size {} --num-attention-heads {} --ffn-hidden-size {} "
      "--seq-length {} --max-position-embeddings {} --attention-backend {}",
      m.layers, m.d_model, m.heads, m.ffn, m.seq_len, m.seq_len,
      c.flash_attention ? "flash" : "unfused");
  if (m.kv_heads != m.heads)
    f += fmt::format(" --group-query-attention --num-query-groups {}", m.kv_heads);
  if (m.arch == Arch::llama)
    f += " --swiglu --normalization RMSNorm --position-embedding-type rope "
         "--disable-bias-linear --hidden-dropout 0 --attention-dropout 0";
  if (!m.tied_embeddings) f += " --untie-embeddings-and-output-weights";
  f += "\n";
  if (!even(p))
    f += "# paci's partition puts layers " + fmt::format("{}", fmt::join(c.partition, ",")) +
         " on the stages; Megatron-LM splits them evenly unless --pipeline-model-parallel-layout "
         "describes this split\n";
  return f;
}

std::string torchtitan(const PlanResult& p) {
  const PlanConfig& c = p.config;
  if (asynchronous_kind(c.kind))
    return fmt::format(
        "# torchtitan cannot run a {} schedule: PyTorch's pipelining ends every step with a flush "
        "(no update action; v0.2.2)\n",
        c.kind);
  const char* schedule = c.kind == "gpipe"         ? "GPipe"
                         : c.kind == "interleaved" ? "Interleaved1F1B"
                         : c.kind == "1f1b"        ? "1F1B"
                                                   : "PipelineScheduleSingle";
  std::string t = fmt::format(
      "# paci plan -> torchtitan (job config keys of v0.2.2); {} GPUs\n[parallelism]\n"
      "tensor_parallel_degree = {}\npipeline_parallel_degree = {}\n"
      "pipeline_parallel_schedule = \"{}\"\n",
      c.gpus, c.tp, c.pp, schedule);
  if (c.kind == "zb-h1" || c.kind == "zb-h2")
    t += "pipeline_parallel_schedule_csv = \"schedule.csv\"  # paci plan -o DIR writes it\n";
  if (c.kind == "interleaved" && even(p))
    t += fmt::format("pipeline_parallel_layers_per_stage = {}\n",
                     c.model.layers / (static_cast<std::int64_t>(c.pp) * c.chunks));
  t += fmt::format("pipeline_parallel_microbatch_size = {}\n", c.microbatch_size);
  t += c.distributed_optimizer
           ? fmt::format("data_parallel_shard_degree = {}\ndata_parallel_replicate_degree = 1\n",
                         c.dp())
           : fmt::format("data_parallel_replicate_degree = {}\ndata_parallel_shard_degree = 1\n",
                         c.dp());
  if (c.tp_comm_overlap) t += "enable_async_tensor_parallel = true  # needs torch.compile\n";
  t += fmt::format("\n[training]\nlocal_batch_size = {}\nglobal_batch_size = {}\nseq_len = {}\n",
                   c.global_batch / c.dp(), c.global_batch, c.model.seq_len);
  t += fmt::format("\n[activation_checkpoint]\nmode = \"{}\"\n", to_string(c.recompute));
  if (c.recompute == Recompute::selective) t += "selective_ac_option = \"op\"\n";
  if (c.tp > 1 && !c.sequence_parallel)
    t += "# torchtitan v0.2.2 always runs sequence parallelism with tensor parallelism\n";
  t += "# [model] name and flavor: torchtitan defines model shapes in code; pick the flavor of " +
       c.model.name + "\n";
  return t;
}

}  // namespace

std::string emit(Emitter emitter, const PlanResult& plan) {
  return emitter == Emitter::megatron ? megatron(plan) : torchtitan(plan);
}

std::string plot_frontier(const std::string& csv_path, const std::string& svg_path) {
  for (const char* python : {"python3", "/usr/bin/python3"})
    if (run(python, csv_path, svg_path) == 0) return "";
  return fmt::format(
      "{} not drawn: no python3 with matplotlib (apt-get install "
      "python3-matplotlib); the frontier is in {}",
      svg_path, csv_path);
}

}  // namespace paci::plan
