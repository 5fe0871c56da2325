// search_document, search_text, nothing_fits, frontier_csv.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "plan/cpu/cpu.hpp"
#include "plan/report/report.hpp"

namespace paci::plan {

namespace {

double gib(double bytes) {
  return bytes / (1024.0 * 1024.0 * 1024.0);
}

std::string knobs(const PlanConfig& c) {
  if (c.cluster.name == kCpuClusterName)  // one thread per stage: its partition matters
    return fmt::format("{} p={}{} M={} layers {}", c.kind, c.pp,
                       c.kind == "interleaved" ? fmt::format(" v={}", c.chunks) : "",
                       c.microbatches(), fmt::join(c.partition, ","));
  std::string switches;
  if (c.sequence_parallel) switches += " sp";
  if (c.tp_comm_overlap) switches += " tp-overlap";
  if (c.zero > 0) switches += fmt::format(" z{}", c.zero);
  if (c.zero > 0 && c.shard_group > 0) switches += fmt::format("/{}", c.shard_group);
  if (c.overlap_grad_reduce) switches += " grad-overlap";
  if (c.pp > 1 && c.p2p_overlapped() != default_overlap_p2p(c.kind))
    switches += c.p2p_overlapped() ? " p2p-overlap" : " p2p-waited";
  if (c.offload_layers > 0) switches += fmt::format(" offload{}", c.offload_layers);
  return fmt::format("{} t={}{} p={} d={}{}{} b={} M={} {}{}", c.kind, c.tp,
                     c.cp > 1 ? fmt::format(" c={}{}", c.cp, c.cp_all_gather ? "ag" : "") : "",
                     c.pp, c.dp(), c.model.moe() ? fmt::format(" e={}", c.ep) : "",
                     c.kind == "interleaved" ? fmt::format(" v={}", c.chunks) : "",
                     c.microbatch_size, c.microbatches(), to_string(c.recompute), switches);
}

std::string plans_table(const std::vector<PlanResult>& plans) {
  std::string out =
      fmt::format("{:>4}  {:<58} {:>9} {:>11} {:>6} {:>7} {:>9} {:>5}\n", "#", "configuration",
                  "step (s)", "tokens/s", "MFU", "bubble", "peak GiB", "stale");
  for (std::size_t i = 0; i < plans.size(); ++i) {
    const PlanResult& p = plans[i];
    out +=
        fmt::format("{:>4}  {:<58} {:>9.3f} {:>11.0f} {:>5.1f}% {:>6.1f}% {:>9.1f} {:>5}\n", i + 1,
                    knobs(p.config), p.step_s, p.tokens_per_s, 100 * p.mfu, 100 * p.bubble_ratio,
                    gib(static_cast<double>(p.peak_memory_bytes)), p.max_staleness);
  }
  return out;
}

// Per step on the busiest device: the exposed data-parallel reduction and the tensor-parallel
// collectives, in seconds.
std::pair<double, double> communication_s(const PlanResult& p) {
  double dp = 0, tp = 0;
  for (const StagePlan& s : p.stages) {
    dp = std::max(dp, s.exposed_reduce_s);
    tp = std::max(tp, static_cast<double>(p.microbatches) *
                          (s.pieces.forward_comm_s + s.pieces.backward_comm_s));
  }
  return {dp, tp};
}

}  // namespace

ordered_json search_document(const SearchResult& r, const SearchSpace& space,
                             std::int32_t max_staleness) {
  std::vector<PlanResult> all = r.plans;
  ordered_json j = plans_document(all.empty() ? r.frontier : all);
  if (all.empty()) j["plans"] = ordered_json::array();
  if (!j.contains("model")) {
    j["model"] = {{"name", space.model.name}, {"parameters", parameter_counts(space.model).total}};
    j["cluster"] = {{"name", space.cluster.name}};
    j["gpus"] = space.gpus;
    j["global_batch"] = space.global_batch;
  }
  j["frontier"] = ordered_json::array();
  for (const PlanResult& p : r.frontier) j["frontier"].push_back(plan_json(p));
  j["rejected"] = {{"invalid", r.rejected.invalid},
                   {"out_of_memory", r.rejected.out_of_memory},
                   {"out_of_memory_least_excess_bytes", r.rejected.least_excess_bytes},
                   {"out_of_host_memory", r.rejected.out_of_host_memory},
                   {"out_of_host_memory_least_excess_bytes", r.rejected.least_host_excess_bytes},
                   {"too_stale", r.rejected.too_stale},
                   {"pruned", r.rejected.pruned},
                   {"invalid_example", r.rejected.invalid_example},
                   {"not_runnable", r.rejected.not_runnable},
                   {"not_runnable_example", r.rejected.not_runnable_example}};
  j["search"] = {{"configurations", r.configurations},
                 {"simulated", r.simulated},
                 {"pruned", r.rejected.pruned},
                 {"seconds", r.seconds},
                 {"jobs", r.jobs},
                 {"configurations_per_s",
                  r.seconds > 0 ? static_cast<double>(r.configurations) / r.seconds : 0.0},
                 {"memory_limit_bytes", static_cast<std::int64_t>(r.memory_limit_bytes)},
                 {"max_staleness", max_staleness},
                 {"interrupted", r.interrupted}};
  if (r.smallest) {
    j["smallest"] = {{"configuration", knobs(*r.smallest)}, {"peak_bytes", r.smallest_peak_bytes}};
    j["alternatives"] = ordered_json::array();
    for (const auto& [what, bytes] : r.alternatives)
      j["alternatives"].push_back({{"change", what}, {"peak_bytes", bytes}});
  }
  return j;
}

namespace {

// The configurations that fit the GPU but offload more than the host memory per GPU holds.
std::string host_memory_rejections(const SearchResult& r) {
  return fmt::format(
      "{} that fit the GPU offload more activations than the host memory per GPU holds (the "
      "closest {:.1f} GiB over)",
      r.rejected.out_of_host_memory, gib(static_cast<double>(r.rejected.least_host_excess_bytes)));
}

}  // namespace

std::string nothing_fits(const SearchResult& r) {
  if (!r.plans.empty()) return "";
  if (!r.smallest && r.rejected.not_runnable > 0)
    return fmt::format(
        "no configuration to simulate: of {}, {} cannot run where the plan goes (e.g. {}){}",
        r.configurations, r.rejected.not_runnable, r.rejected.not_runnable_example,
        r.rejected.invalid > 0 ? fmt::format(" and {} were invalid ({})", r.rejected.invalid,
                                             r.rejected.invalid_example)
                               : "");
  if (!r.smallest)
    return fmt::format("no configuration to simulate: all {} were invalid ({})", r.configurations,
                       r.rejected.invalid_example);
  const bool cpu = r.smallest->cluster.name == kCpuClusterName;
  std::string line = fmt::format(
      "no configuration fits in {:.1f} GiB{}{}: the smallest peak found needs {:.1f} GiB ({})",
      gib(r.memory_limit_bytes), cpu ? "" : " per GPU",
      r.rejected.too_stale > 0 ? " and the staleness limit" : "",
      gib(static_cast<double>(r.smallest_peak_bytes)), knobs(*r.smallest));
  for (const auto& [what, bytes] : r.alternatives)
    line += fmt::format("; with {}: at least {:.1f} GiB", what, gib(static_cast<double>(bytes)));
  if (r.rejected.out_of_host_memory > 0) line += "; " + host_memory_rejections(r);
  if (static_cast<double>(r.smallest_static_bytes) > r.memory_limit_bytes)
    line += fmt::format(
        "; its weights, gradients and optimizer state alone need {:.1f} GiB: it takes {}",
        gib(static_cast<double>(r.smallest_static_bytes)),
        cpu ? "more memory (--memory-limit)" : "more GPUs (or larger ones)");
  return line;
}

std::string search_text(const SearchResult& r, const SearchSpace& space) {
  const bool cpu = space.cluster.name == kCpuClusterName;
  std::string out =
      cpu ? fmt::format(
                "{} on this machine's CPU executor ({} cores), global batch {} x {} tokens\n"
                "simulated {} configurations in {:.2f} s from the per-layer calibration{}\n",
                space.model.name, space.gpus, space.global_batch, space.model.seq_len, r.simulated,
                r.seconds, r.interrupted ? " (INTERRUPTED: the best so far)" : "")
          : fmt::format(
                "{} ({:.2f} B parameters) on {} x {}, global batch {} x {} tokens{}\n"
                "searched {} configurations in {:.2f} s ({:.0f} a second, {} thread{}): {} "
                "simulated, {} "
                "pruned by their bound{}\n",
                space.model.name, static_cast<double>(parameter_counts(space.model).total) / 1e9,
                space.gpus, space.cluster.name, space.global_batch, space.model.seq_len,
                fmt::format("{}{}{}{}",
                            space.precision != Precision::bf16
                                ? fmt::format(", {} GEMMs", to_string(space.precision))
                                : "",
                            space.bf16_gradients ? ", bf16 gradients" : "",
                            space.fp8_params ? ", FP8 weights" : "",
                            space.bf16_moments ? ", bf16 AdamW moments" : ""),
                r.configurations, r.seconds,
                r.seconds > 0 ? static_cast<double>(r.configurations) / r.seconds : 0.0, r.jobs,
                r.jobs == 1 ? "" : "s", r.simulated, r.rejected.pruned,
                r.interrupted ? " (INTERRUPTED: the best so far)" : "");
  out += fmt::format(
      "memory limit {:.1f} GiB {}{}\n", gib(r.memory_limit_bytes), cpu ? "for the run" : "per GPU",
      !cpu && r.memory_limit_bytes == space.cluster.memory_bytes - kFrameworkReserveBytes
          ? fmt::format(" (the GPU's {:.1f} GiB less a {:.0f} GiB reserve)",
                        gib(space.cluster.memory_bytes), gib(kFrameworkReserveBytes))
          : "");
  if (!r.plans.empty()) {
    out += fmt::format("top {}:\n", r.plans.size()) + plans_table(r.plans);
    out += fmt::format("Pareto frontier over step time, peak memory and staleness ({} plans):\n",
                       r.frontier.size()) +
           plans_table(r.frontier);
  }
  out += fmt::format(
      "rejected: {} out of memory{}, {} too stale, {} invalid{}, {} pruned (their bound could "
      "enter neither the top {} nor the frontier)\n",
      r.rejected.out_of_memory,
      r.rejected.least_excess_bytes >= 0
          ? fmt::format(" (the closest {:.1f} GiB over)",
                        gib(static_cast<double>(r.rejected.least_excess_bytes)))
          : "",
      r.rejected.too_stale, r.rejected.invalid,
      r.rejected.invalid_example.empty() ? ""
                                         : fmt::format(" (e.g. {})", r.rejected.invalid_example),
      r.rejected.pruned, r.plans.size());
  if (r.rejected.out_of_host_memory > 0) out += "rejected: " + host_memory_rejections(r) + "\n";
  if (r.rejected.not_runnable > 0)
    out += fmt::format("left out: {} the target cannot run (e.g. {})\n", r.rejected.not_runnable,
                       r.rejected.not_runnable_example);
  if (r.best_synchronous && r.best_asynchronous) {
    const PlanResult& s = *r.best_synchronous;
    const PlanResult& a = *r.best_asynchronous;
    const auto [s_dp, s_tp] = communication_s(s);
    const auto [a_dp, a_tp] = communication_s(a);
    out += fmt::format(
        "best synchronous ({}) against best asynchronous ({}): step {:.3f} s against {:.3f} s "
        "({:+.1f}%); bubble {:.1f}% against {:.1f}%; peak memory {:.1f} against {:.1f} GiB; "
        "exposed data-parallel reduction per step {:.3f} against {:.3f} s, tensor-parallel "
        "collectives {:.3f} against {:.3f} s on the busiest stage; staleness {} against {}\n",
        knobs(s.config), knobs(a.config), s.step_s, a.step_s, 100 * (a.step_s / s.step_s - 1),
        100 * s.bubble_ratio, 100 * a.bubble_ratio, gib(static_cast<double>(s.peak_memory_bytes)),
        gib(static_cast<double>(a.peak_memory_bytes)), s_dp, a_dp, s_tp, a_tp, s.max_staleness,
        a.max_staleness);
  }
  return out;
}

std::string frontier_csv(const std::vector<PlanResult>& frontier) {
  std::string out =
      "kind,tp,cp,cp_comm,pp,dp,chunks,microbatch_size,microbatches,recompute,sequence_parallel,"
      "tp_comm_overlap,zero,shard_group,overlap_grad_reduce,offload_layers,step_s,tokens_per_s,"
      "mfu,bubble_ratio,peak_memory_bytes,max_staleness,partition\n";
  for (const PlanResult& p : frontier) {
    const PlanConfig& c = p.config;
    out += fmt::format(
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.6g},{:.6g},{:.6g},{:.6g},{},{},{}\n",
        c.kind, c.tp, c.cp, c.cp_all_gather ? "all_gather" : "p2p", c.pp, c.dp(), c.chunks,
        c.microbatch_size, c.microbatches(), to_string(c.recompute), c.sequence_parallel,
        c.tp_comm_overlap, c.zero, c.zero > 0 ? c.shards() : 0, c.overlap_grad_reduce,
        c.offload_layers, p.step_s, p.tokens_per_s, p.mfu, p.bubble_ratio, p.peak_memory_bytes,
        p.max_staleness, fmt::join(c.partition, " "));
  }
  return out;
}

}  // namespace paci::plan
