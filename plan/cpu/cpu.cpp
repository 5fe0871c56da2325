// The CPU plan: configurations of the CPU executor, each simulated from a per-layer calibration.
#include "plan/cpu/cpu.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <optional>

#include "schedules/analysis.hpp"
#include "schedules/generators.hpp"

namespace paci::plan {

namespace {

// Every way to put `layers` layers on `stages` stages, each at least one, in lexicographic order.
void compositions(std::int32_t layers, std::int32_t stages, std::vector<std::int32_t>& prefix,
                  std::vector<std::vector<std::int32_t>>& out) {
  if (stages == 1) {
    prefix.push_back(layers);
    out.push_back(prefix);
    prefix.pop_back();
    return;
  }
  for (std::int32_t first = 1; first <= layers - (stages - 1); ++first) {
    prefix.push_back(first);
    compositions(layers - first, stages - 1, prefix, out);
    prefix.pop_back();
  }
}

}  // namespace

ModelSpec cpu_model(const LayerCalibration& cal) {
  ModelSpec m;
  m.name = fmt::format("paci GPT (L={}, C={}, heads {}, T={}, V={})", cal.layers, cal.d_model,
                       cal.heads, cal.seq_len, cal.vocab);
  m.arch = Arch::gpt;
  m.layers = cal.layers;
  m.d_model = cal.d_model;
  m.heads = cal.heads;
  m.kv_heads = cal.heads;
  m.ffn = 4 * cal.d_model;
  m.vocab = cal.vocab;
  m.seq_len = cal.seq_len;
  m.tied_embeddings = false;  // paci's GPT has its own LM head
  return m;
}

ClusterSpec cpu_cluster(const LayerCalibration& cal, double memory_bytes) {
  ClusterSpec c;
  c.name = std::string(kCpuClusterName);
  c.description =
      fmt::format("this machine's CPU executor, {} core(s): {}", cal.cores, cal.description);
  c.memory_bytes = memory_bytes;
  c.gpus_per_node = 1;
  return c;
}

SearchSpace cpu_search_space(const LayerCalibration& cal, double memory_bytes,
                             std::int64_t global_batch) {
  SearchSpace s;
  s.model = cpu_model(cal);
  s.cluster = cpu_cluster(cal, memory_bytes);
  s.gpus = cal.cores;
  s.global_batch = global_batch;
  // The CPU executor has no tensor parallelism, optimizer sharding or overlapped reduction.
  s.sequence_parallel = s.tp_comm_overlap = s.overlap_grad_reduce = {false};
  s.zero = {0};
  return s;
}

PlanConfig cpu_config(const LayerCalibration& cal, double memory_bytes, std::int32_t pp,
                      const std::string& kind, std::int32_t chunks, std::int64_t microbatches,
                      const std::vector<std::int32_t>& layers) {
  if (pp < 1) throw InputError(fmt::format("--pp must be at least 1, got {}", pp));
  if (microbatches < 1)
    throw InputError(fmt::format("--microbatches must be at least 1, got {}", microbatches));
  PlanConfig c;
  c.model = cpu_model(cal);
  c.cluster = cpu_cluster(cal, memory_bytes);
  c.gpus = pp;
  c.pp = pp;
  c.tp = 1;
  c.chunks = std::max(chunks, 1);
  c.kind = kind;
  c.microbatch_size = cal.batch;
  c.global_batch = microbatches * cal.batch;
  c.partition = layers;
  check_pipeline(c);
  if (layers.empty()) throw InputError("a CPU plan needs its partition (layers per model stage)");
  return c;
}

PlanResult evaluate_cpu(const LayerCalibration& cal, const PlanConfig& config,
                        const EvaluateOptions& options, SimResult& simulated) {
  PlanResult r;
  r.config = config;
  r.config.overlap_p2p = true;  // the executor's sends travel while its stage computes
  r.parameters = parameter_counts(config.model).total;
  r.dp = 1;
  r.microbatches = config.microbatches();
  r.simulated_steps = simulated_steps(config);
  r.schedule =
      generate_schedule(config.kind, config.pp, static_cast<std::int32_t>(r.microbatches),
                        r.simulated_steps, config.kind == "interleaved" ? config.chunks : 0);
  r.costs = cpu_cost_model(cal, config.partition, placement_of(config));
  std::int32_t first_layer = 0;
  for (std::int32_t s = 0; s < config.stages(); ++s) {
    const StageCost& cost = r.costs.stages[static_cast<std::size_t>(s)];
    StagePlan sp;
    sp.stage = s;
    sp.device = r.schedule.placement[static_cast<std::size_t>(s)];
    sp.first_layer = first_layer;
    sp.layers = config.partition[static_cast<std::size_t>(s)];
    first_layer += sp.layers;
    sp.embedding = s == 0;
    sp.head = s + 1 == config.stages();
    sp.pieces.forward_s = cost.forward_s;
    sp.pieces.input_grad_s = cost.input_grad_s;
    sp.pieces.weight_grad_s = cost.weight_grad_s;
    sp.pieces.parameters = cost.weight_bytes / 4;  // fp32
    sp.pieces.activation_bytes = cost.activation_bytes;
    sp.pieces.stash_bytes = cost.weight_grad_stash_bytes;
    sp.optimizer_s = cost.update_s;
    r.stages.push_back(sp);
  }
  SimOptions so;
  so.record_timeline = options.record_timeline;
  simulated = simulate(r.schedule, r.costs, so);
  measure(r, simulated);
  return r;
}

SearchResult search_cpu(const CpuSpace& space, const SearchOptions& options) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const LayerCalibration& cal = space.calibration;
  if (!(options.memory_limit_bytes > 0))
    throw InputError("the memory limit must be a positive number of bytes");
  const auto L = static_cast<std::int32_t>(cal.layers);
  SearchResult result;
  result.memory_limit_bytes = options.memory_limit_bytes;
  result.jobs = 1;
  const auto reject = [&](const std::string& why) {
    ++result.configurations;
    ++result.rejected.invalid;
    if (result.rejected.invalid_example.empty()) result.rejected.invalid_example = why;
  };
  // The pipelines: stage threads, kind, chunks; and how many partitions each has.
  struct Pipeline {
    std::int32_t p, v;
    std::string kind;
  };
  std::vector<Pipeline> pipelines;
  double partitions = 0;
  std::vector<std::int32_t> pps = space.pp;
  if (pps.empty())
    for (const std::int32_t p : {1, 2, 4})
      if (p <= L) pps.push_back(p);
  for (const std::int32_t p : pps)
    for (const std::string& kind : space.kinds.empty() ? all_kinds() : space.kinds) {
      // Two model stages on each thread, mirrored (the V, DualPipe's two copies) are not placed
      // on CPU threads yet: searched only for GPU clusters, refused when asked for here.
      if (mirrored_kind(kind)) {
        if (!space.kinds.empty())
          reject(fmt::format(
              "{0}: a CPU plan does not place {1} two stages per thread yet (paci train "
              "runs it: paci train --kind {0})",
              kind, kind == "dualpipe" ? "DualPipe's" : "the V's"));
        continue;
      }
      std::vector<std::int32_t> vs{1};
      if (kind == "interleaved") {
        vs = space.chunks;
        if (vs.empty())
          for (std::int32_t v = 2; p > 1 && p * v <= L; ++v) vs.push_back(v);
        if (vs.empty()) {
          reject(
              fmt::format("interleaved on {} stage thread(s): no v >= 2 with a layer per model "
                          "stage ({} layers)",
                          p, L));
          continue;
        }
      }
      for (const std::int32_t v : vs) {
        if (!space.partition.empty()) {
          partitions += 1;
        } else if (p * v <= L) {  // C(L - 1, p·v - 1) ways to cut L layers into p·v stages
          double ways = 1;
          for (std::int32_t k = 1; k < p * v; ++k) ways = ways * (L - k) / k;
          partitions += ways;
        } else {
          reject(fmt::format("{} model stages (p = {} x v = {}) are more than the {} layers", p * v,
                             p, v, L));
          continue;
        }
        pipelines.push_back({p, v, kind});
      }
    }
  if (partitions > kMaxCpuConfigurations)
    throw InputError(fmt::format(
        "{:.0f} configurations (every partition of {} layers) are more than a CPU plan simulates "
        "({}): fix --pp, --kind or --partition",
        partitions, L, kMaxCpuConfigurations));

  std::vector<PlanResult> fitting;
  std::optional<PlanResult> smallest;
  for (const Pipeline& pipe : pipelines) {
    std::vector<std::vector<std::int32_t>> candidates;
    if (!space.partition.empty()) {
      candidates.push_back(space.partition);
    } else {
      std::vector<std::int32_t> prefix;
      compositions(L, pipe.p * pipe.v, prefix, candidates);
    }
    for (const auto& layers : candidates) {
      if (options.interrupted && options.interrupted->load()) {
        result.interrupted = true;
        break;
      }
      PlanResult plan;
      try {
        const PlanConfig c = cpu_config(cal, options.memory_limit_bytes, pipe.p, pipe.kind, pipe.v,
                                        space.microbatches, layers);
        SimResult sim;
        plan = evaluate_cpu(cal, c, {}, sim);
      } catch (const InputError& e) {
        reject(e.what());
        continue;
      }
      ++result.configurations;
      ++result.simulated;
      plan.schedule.devices.clear();  // the ranked plans need no action lists
      if (!smallest || plan.peak_memory_bytes < smallest->peak_memory_bytes) smallest = plan;
      if (options.max_staleness >= 0 && plan.max_staleness > options.max_staleness) {
        ++result.rejected.too_stale;
        continue;
      }
      if (!plan.fits) {
        result.rejected.add_out_of_memory(static_cast<std::int64_t>(
            static_cast<double>(plan.peak_memory_bytes) - options.memory_limit_bytes));
        continue;
      }
      fitting.push_back(std::move(plan));
    }
  }
  rank_plans(fitting, options.top, result);
  if (result.plans.empty() && smallest) {  // what the smallest needs (no knob would shrink it)
    result.smallest = smallest->config;
    result.smallest_peak_bytes = smallest->peak_memory_bytes;
    std::int64_t fixed = 0;
    for (const StageCost& s : smallest->costs.stages) fixed = std::max(fixed, s.static_bytes());
    result.smallest_static_bytes = fixed;
  }
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (options.progress) {
    SearchProgress progress;
    progress.done = progress.total = result.configurations;
    progress.seconds = result.seconds;
    if (!result.plans.empty()) progress.best_step_s = result.plans.front().step_s;
    options.progress(progress);
  }
  return result;
}

double machine_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && size > 0 ? static_cast<double>(pages) * static_cast<double>(size)
                               : 8.0 * 1024 * 1024 * 1024;  // unknown: assume 8 GiB
}

std::string train_command(const PlanResult& p, std::int64_t steps) {
  const PlanConfig& c = p.config;
  return fmt::format(
      "paci train --kind {} --stages {}{} --microbatches {} --steps {} --partition {} --layers {} "
      "--heads {} --d-model {} --seq-len {} --vocab {} --batch {}",
      c.kind, c.pp, c.kind == "interleaved" ? fmt::format(" --chunks {}", c.chunks) : "",
      c.microbatches(), steps, fmt::join(c.partition, ","), c.model.layers, c.model.heads,
      c.model.d_model, c.model.seq_len, c.model.vocab, c.microbatch_size);
}

}  // namespace paci::plan
