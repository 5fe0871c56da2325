// The partition of the layers over a pipeline's stages: the smallest largest stage's work per step
// under a memory limit, by bisection over the stages' possible work (search() and
// bottleneck_partition()).
#include "plan/search/partition.hpp"

#include <algorithm>

namespace paci::plan {

PartitionTables partition_tables(const PlanConfig& c, const ConfigCosts& costs,
                                 const std::vector<std::int32_t>& in_flight) {
  PartitionTables t;
  t.stages = c.stages();
  t.layers = static_cast<std::int32_t>(c.model.layers);
  t.in_flight = in_flight;
  const double M = static_cast<double>(c.microbatches());
  const double updates = c.kind == "pipedream" ? M : 1.0;
  for (std::int32_t s : {0, t.stages / 2, t.stages - 1}) {
    const int k = t.kind_of(s);
    if (!t.work[k].empty()) continue;
    t.work[k].assign(static_cast<std::size_t>(t.layers) + 1, 0.0);
    t.fixed[k].assign(static_cast<std::size_t>(t.layers) + 1, 0);
    t.activations[k].assign(static_cast<std::size_t>(t.layers) + 1, 0);
    for (std::int32_t n = 1; n <= t.layers; ++n) {
      const StageCost cost = costs.stage_cost(costs.stage(s, 0, n));
      t.work[k][n] = M * (cost.forward_s + cost.backward_s) + updates * cost.update_s;
      t.fixed[k][n] = cost.static_bytes();
      t.activations[k][n] = cost.activation_bytes;
    }
  }
  return t;
}

// For a bound T each stage takes at most cap(s, T) layers (work and memory grow with the layers),
// and the smallest T whose caps add up to the layers is the optimum.
std::vector<std::int32_t> partition_under(const PartitionTables& t, double limit_bytes) {
  const std::int32_t S = t.stages, L = t.layers;
  const auto fits = [&](std::int32_t s, std::int32_t n) {
    const int k = t.kind_of(s);
    return limit_bytes <= 0 ||
           static_cast<double>(t.fixed[k][n] + t.in_flight[static_cast<std::size_t>(s)] *
                                                   t.activations[k][n]) <= limit_bytes;
  };
  const auto cap = [&](std::int32_t s, double T) {
    const int k = t.kind_of(s);
    std::int32_t lo = 0, hi = L;
    while (lo < hi) {
      const std::int32_t mid = (lo + hi + 1) / 2;
      if (t.work[k][mid] <= T && fits(s, mid))
        lo = mid;
      else
        hi = mid - 1;
    }
    return lo;
  };
  const auto feasible = [&](double T) {
    std::int64_t total = 0;
    for (std::int32_t s = 0; s < S; ++s) {
      const std::int32_t n = cap(s, T);
      if (n < 1) return false;
      total += n;
    }
    return total >= L;
  };
  std::vector<double> candidates;
  for (const auto& table : t.work)
    for (std::size_t n = 1; n < table.size(); ++n) candidates.push_back(table[n]);
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  const auto it = std::partition_point(candidates.begin(), candidates.end(),
                                       [&](double T) { return !feasible(T); });
  if (it == candidates.end()) return {};
  // Fill stage by stage, leaving every later stage at least one layer.
  std::vector<std::int32_t> out;
  std::int32_t left = L;
  for (std::int32_t s = 0; s < S; ++s) {
    const std::int32_t n = std::min(cap(s, *it), left - (S - 1 - s));
    out.push_back(n);
    left -= n;
  }
  if (left != 0) return {};
  return out;
}

std::vector<std::int32_t> bottleneck_partition(const PlanConfig& c, const ConfigCosts& costs,
                                               const std::vector<std::int32_t>& in_flight,
                                               double limit_bytes) {
  return partition_under(partition_tables(c, costs, in_flight), limit_bytes);
}

}  // namespace paci::plan
