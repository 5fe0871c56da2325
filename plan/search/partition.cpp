// The partition of the layers over a pipeline's stages: the smallest largest stage's work per step
// under a memory limit, by bisection over the stages' possible work (search() and
// bottleneck_partition()).
#include "plan/search/partition.hpp"

#include <algorithm>
#include <array>
#include <cstddef>

namespace paci::plan {

StageCostTable stage_cost_table(const PlanConfig& c, const ConfigCosts& costs) {
  StageCostTable t;
  t.stages = c.stages();
  t.layers = static_cast<std::int32_t>(c.model.layers);
  for (std::int32_t s : {0, t.stages / 2, t.stages - 1}) {
    const int k = t.kind_of(s);
    if (!t.cost[k].empty()) continue;
    t.cost[k].resize(static_cast<std::size_t>(t.layers) + 1);
    // A later stage's layers come after the first stage's: past a mixture of experts' first
    // dense layers when the first stage holds them (every partition of at least that many layers
    // on it; the others' tables are then a bound's approximation, evaluate() exact).
    const auto dense = static_cast<std::int32_t>(c.model.dense_layers);
    for (std::int32_t n = 1; n <= t.layers; ++n)
      t.cost[k][static_cast<std::size_t>(n)] =
          costs.stage_cost(costs.stage(s, k == 0 ? 0 : std::min(dense, t.layers - n), n));
  }
  return t;
}

std::vector<StageCost> StageCostTable::stage_costs(const std::vector<std::int32_t>& layers) const {
  std::vector<StageCost> out;
  out.reserve(layers.size());
  for (std::size_t s = 0; s < layers.size(); ++s)
    out.push_back(cost[kind_of(static_cast<std::int32_t>(s))][static_cast<std::size_t>(layers[s])]);
  return out;
}

PartitionTables partition_tables(const PlanConfig& c, const StageCostTable& table,
                                 const std::vector<std::int32_t>& in_flight) {
  PartitionTables t;
  t.stages = table.stages;
  t.layers = table.layers;
  t.in_flight = in_flight;
  const double M = static_cast<double>(c.microbatches());
  const double updates = c.kind == "pipedream" ? M : 1.0;
  for (int k = 0; k < 3; ++k) {
    if (table.cost[k].empty()) continue;
    t.work[k].assign(static_cast<std::size_t>(t.layers) + 1, 0.0);
    t.fixed[k].assign(static_cast<std::size_t>(t.layers) + 1, 0);
    t.activations[k].assign(static_cast<std::size_t>(t.layers) + 1, 0);
    for (std::size_t n = 1; n < table.cost[k].size(); ++n) {
      const StageCost& cost = table.cost[k][n];
      t.work[k][n] = M * (cost.forward_s + cost.backward_s) + updates * cost.update_s;
      t.fixed[k][n] = cost.static_bytes();
      t.activations[k][n] = cost.activation_bytes;
    }
  }
  return t;
}

PartitionTables partition_tables(const PlanConfig& c, const ConfigCosts& costs,
                                 const std::vector<std::int32_t>& in_flight) {
  return partition_tables(c, stage_cost_table(c, costs), in_flight);
}

// For a bound T each stage takes at most cap(s, T) layers (work and memory grow with the layers),
// and the smallest T whose caps add up to the layers is the optimum. A stage's cap is the smaller
// of what its memory allows (independent of T: found once) and what its kind's work allows under T.
std::vector<std::int32_t> partition_under(const PartitionTables& t, double limit_bytes) {
  const std::int32_t S = t.stages, L = t.layers;
  // The most layers stage s holds within the limit (work aside).
  std::vector<std::int32_t> memory_cap(static_cast<std::size_t>(S), L);
  if (limit_bytes > 0)
    for (std::int32_t s = 0; s < S; ++s) {
      const int k = t.kind_of(s);
      const auto fits = [&](std::int32_t n) {
        return static_cast<double>(t.fixed[k][n] + t.in_flight[static_cast<std::size_t>(s)] *
                                                       t.activations[k][n]) <= limit_bytes;
      };
      std::int32_t lo = 0, hi = L;
      while (lo < hi) {
        const std::int32_t mid = (lo + hi + 1) / 2;
        if (fits(mid))
          lo = mid;
        else
          hi = mid - 1;
      }
      memory_cap[static_cast<std::size_t>(s)] = lo;
    }
  // The most layers a stage of kind k holds with its work within T (the work grows with them).
  const auto work_cap = [&](int k, double T) {
    const auto& w = t.work[k];
    return static_cast<std::int32_t>(std::upper_bound(w.begin() + 1, w.end(), T) - w.begin() - 1);
  };
  const auto caps = [&](double T, std::array<std::int32_t, 3>& by_kind) {
    for (int k = 0; k < 3; ++k) by_kind[k] = t.work[k].empty() ? 0 : work_cap(k, T);
  };
  const auto feasible = [&](double T) {
    std::array<std::int32_t, 3> by_kind{};
    caps(T, by_kind);
    std::int64_t total = 0;
    for (std::int32_t s = 0; s < S; ++s) {
      const std::int32_t n =
          std::min(by_kind[t.kind_of(s)], memory_cap[static_cast<std::size_t>(s)]);
      if (n < 1) return false;
      total += n;
    }
    return total >= L;
  };
  // The candidate bounds: every table's work values, in order (each table grows with n).
  std::vector<double> candidates;
  for (const auto& table : t.work) {
    if (table.size() < 2) continue;
    const std::size_t mid = candidates.size();
    candidates.insert(candidates.end(), table.begin() + 1, table.end());
    std::inplace_merge(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(mid),
                       candidates.end());
  }
  if (!std::is_sorted(candidates.begin(), candidates.end()))  // a table that does not grow
    std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  const auto it = std::partition_point(candidates.begin(), candidates.end(),
                                       [&](double T) { return !feasible(T); });
  if (it == candidates.end()) return {};
  // Fill stage by stage, leaving every later stage at least one layer.
  std::array<std::int32_t, 3> by_kind{};
  caps(*it, by_kind);
  std::vector<std::int32_t> out;
  std::int32_t left = L;
  for (std::int32_t s = 0; s < S; ++s) {
    const std::int32_t cap =
        std::min(by_kind[t.kind_of(s)], memory_cap[static_cast<std::size_t>(s)]);
    const std::int32_t n = std::min(cap, left - (S - 1 - s));
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

std::vector<std::int32_t> v_partition(const PlanConfig& c, const ConfigCosts& costs) {
  const std::int32_t S = c.model_stages(), L = static_cast<std::int32_t>(c.model.layers);
  if (S < 3) return default_partition(c);
  const std::vector<std::int32_t>& placement = costs.placement();
  std::vector<std::int32_t> best;
  double best_load = 0;
  for (std::int32_t e = L / S; e >= 1; --e) {
    std::vector<std::int32_t> layers(static_cast<std::size_t>(S));
    layers.front() = layers.back() = e;
    const std::int32_t rest = L - 2 * e, middle = S - 2;
    if (rest < middle) continue;
    for (std::int32_t s = 1; s + 1 < S; ++s)
      layers[static_cast<std::size_t>(s)] = rest / middle + (s - 1 < rest % middle ? 1 : 0);
    std::vector<double> work(static_cast<std::size_t>(c.pp), 0.0);
    const std::vector<StageCost> stages = costs.stage_costs(layers);
    for (std::size_t s = 0; s < stages.size(); ++s)
      work[static_cast<std::size_t>(placement[s])] += stages[s].forward_s + stages[s].backward_s;
    const double load = *std::max_element(work.begin(), work.end());
    if (best.empty() || load < best_load) {
      best = std::move(layers);
      best_load = load;
    }
  }
  return best.empty() ? default_partition(c) : best;
}

}  // namespace paci::plan
