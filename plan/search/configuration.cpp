// One configuration out of a search space: the fixed one a space may name (with or without its
// switches left open), and one configuration evaluated at its best partition (search():
// search.cpp).
#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "plan/search/partition.hpp"
#include "plan/search/search.hpp"
#include "schedules/analysis.hpp"
#include "schedules/generators.hpp"

namespace paci::plan {

std::optional<PlanConfig> fixed_but_switches(const SearchSpace& space) {
  SearchSpace fixed = space;
  for (std::vector<bool>* knob : {&fixed.sequence_parallel, &fixed.tp_comm_overlap,
                                  &fixed.overlap_grad_reduce, &fixed.cp_all_gather})
    if (!knob->empty()) knob->resize(1);
  // One HSDP group given goes with the first ZeRO stage that shards; several are searched.
  if (space.shard_group.size() == 1 && space.shard_group[0] != 0) {
    const auto sharded =
        std::find_if(space.zero.begin(), space.zero.end(), [](std::int32_t z) { return z > 0; });
    if (sharded != space.zero.end()) fixed.zero = {*sharded};
  } else {
    fixed.shard_group = {0};
  }
  if (!fixed.zero.empty()) fixed.zero.resize(1);
  if (fixed.offload_layers.size() > 1) fixed.offload_layers.resize(1);
  fixed.cp.resize(1, 1);  // without context parallelism unless the first value given says
  return single_configuration(fixed);
}

PlanConfig unsearched(const SearchSpace& s) {
  PlanConfig c;
  c.model = s.model;
  c.cluster = s.cluster;
  c.gpus = s.gpus;
  c.global_batch = s.global_batch;
  c.flash_attention = s.flash_attention;
  c.precision = s.precision;
  c.bf16_gradients = s.bf16_gradients;
  c.fp8_params = s.fp8_params;
  c.bf16_moments = s.bf16_moments;
  c.expert_load = s.expert_load;
  return c;
}

std::optional<PlanConfig> single_configuration(const SearchSpace& s) {
  const auto one = [](const auto& list) { return list.size() == 1; };
  if (!(one(s.tp) && one(s.pp) && one(s.microbatch_size) && one(s.kinds) && one(s.recompute) &&
        one(s.cp) && (s.cp[0] == 1 || s.cp_all_gather.size() <= 1) && one(s.sequence_parallel) &&
        one(s.tp_comm_overlap) && one(s.zero) && one(s.overlap_grad_reduce) &&
        s.chunks.size() <= 1 && s.shard_group.size() <= 1 && s.offload_layers.size() <= 1 &&
        (s.model.moe() ? one(s.ep) : s.ep.size() <= 1)))
    return std::nullopt;
  PlanConfig c = unsearched(s);
  c.tp = s.tp[0];
  c.cp = s.cp[0];
  c.cp_all_gather = c.cp > 1 && !s.cp_all_gather.empty() && s.cp_all_gather[0];
  c.pp = s.pp[0];
  c.microbatch_size = s.microbatch_size[0];
  c.kind = s.kinds[0];
  c.chunks =
      !s.chunks.empty() ? s.chunks[0] : (c.kind == "interleaved" || mirrored_kind(c.kind) ? 2 : 1);
  c.recompute = s.recompute[0];
  c.sequence_parallel = s.sequence_parallel[0];
  c.tp_comm_overlap = s.tp_comm_overlap[0];
  c.overlap_p2p = s.overlap_p2p;
  c.zero = s.zero[0];
  c.shard_group = s.shard_group.empty() ? 0 : s.shard_group[0];
  if (c.shard_group == c.dp() * c.cp) c.shard_group = 0;  // all the replicas: the default
  c.overlap_grad_reduce = s.overlap_grad_reduce[0];
  c.offload_layers = s.offload_layers.empty() ? 0 : s.offload_layers[0];
  c.ep = s.ep.empty() ? 1 : s.ep[0];
  c.partition = s.partition;
  return c;
}

PlanResult evaluate_best_partition(const PlanConfig& config, double memory_limit_bytes,
                                   const EvaluateOptions& options, SimResult& simulated) {
  check_config(config);
  const double limit = memory_limit_bytes > 0
                           ? memory_limit_bytes
                           : config.cluster.memory_bytes - kFrameworkReserveBytes;
  std::vector<std::vector<std::int32_t>> partitions{default_partition(config)};
  // A given partition, or interleaved's even one, stands; the V and one stage a device find theirs.
  if (config.partition.empty() && mirrored_kind(config.kind)) {
    partitions = {v_partition(config, ConfigCosts(config))};
  } else if (config.partition.empty() && config.kind != "interleaved") {
    const Schedule s =
        generate_schedule(config.kind, config.pp, static_cast<std::int32_t>(config.microbatches()),
                          simulated_steps(config), 0);
    std::vector<std::int32_t> in_flight;
    for (const auto& st : analyze(s).stages) in_flight.push_back(st.peak_activations);
    const ConfigCosts costs(config);
    partitions = {bottleneck_partition(config, costs, in_flight, 0)};
    const auto limited = bottleneck_partition(config, costs, in_flight, limit);
    if (!limited.empty() && limited != partitions.front()) partitions.push_back(limited);
  }
  std::optional<PlanResult> best;
  SimResult best_sim;
  for (const auto& layers : partitions) {
    PlanConfig c = config;
    c.partition = layers;
    SimResult sim;
    PlanResult p = evaluate(c, options, sim);
    p.memory_limit_bytes = limit;
    p.fits = static_cast<double>(p.peak_memory_bytes) <= limit && p.host_fits;
    const bool wins =
        !best || (p.fits && !best->fits) ||
        (p.fits == best->fits &&
         (p.fits ? p.step_s < best->step_s : p.peak_memory_bytes < best->peak_memory_bytes));
    if (wins) {
      best = std::move(p);
      best_sim = std::move(sim);
    }
  }
  simulated = std::move(best_sim);
  return *best;
}

}  // namespace paci::plan
