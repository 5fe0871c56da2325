// The partition of the layers over a non-interleaved pipeline's stages: the one that minimises
// the slowest stage's work per step, each stage within a memory limit. search() computes a
// configuration's tables once and asks them for every limit.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "plan/evaluate/evaluate.hpp"

namespace paci::plan {

// A stage's kind for the tables below: 0 the first (with the embedding), 2 the last (with the
// head), 1 any other; a lone stage is the first.
inline int stage_kind(std::int32_t stage, std::int32_t stages) {
  return stage == 0 ? 0 : (stage == stages - 1 ? 2 : 1);
}

// Work per step and memory of a stage with n layers: they depend on the stage only through its
// kind (first, middle, last), so three tables of L entries serve every partition of a
// configuration.
struct PartitionTables {
  std::int32_t stages = 0, layers = 0;
  std::array<std::vector<double>, 3> work;
  std::array<std::vector<std::int64_t>, 3> fixed, activations;
  std::vector<std::int32_t> in_flight;
  int kind_of(std::int32_t s) const { return stage_kind(s, stages); }
};

// What a non-interleaved configuration's stage of n layers costs (n = 1..L), for each stage kind
// (first, middle, last). It does not depend on the schedule's kind, the micro-batch count or the
// partition: search() computes it once for the kinds that share the rest of a configuration.
struct StageCostTable {
  std::int32_t stages = 0, layers = 0;
  std::array<std::vector<StageCost>, 3> cost;  // [kind][n], n = 0 unused
  int kind_of(std::int32_t s) const { return stage_kind(s, stages); }
  // Every stage's cost for layers per stage `layers` (= costs.stage_costs(layers)).
  std::vector<StageCost> stage_costs(const std::vector<std::int32_t>& layers) const;
};
StageCostTable stage_cost_table(const PlanConfig& config, const ConfigCosts& costs);

// The tables of `config` (M·(F + B) + U per stage, its static bytes and activations), stages
// holding `in_flight[s]` micro-batches at their peak.
PartitionTables partition_tables(const PlanConfig& config, const StageCostTable& table,
                                 const std::vector<std::int32_t>& in_flight);
PartitionTables partition_tables(const PlanConfig& config, const ConfigCosts& costs,
                                 const std::vector<std::int32_t>& in_flight);

// The smallest largest stage's work with every stage's memory within `limit_bytes` (<= 0: no
// limit); empty when no partition fits.
std::vector<std::int32_t> partition_under(const PartitionTables& tables, double limit_bytes);

// The contiguous partition of the layers over a non-interleaved configuration's stages that
// minimises the slowest stage's work per step (M·(F + B) + U), each stage's memory (static bytes
// plus `in_flight[s]` micro-batches of activations) within `limit_bytes` (<= 0: no limit); empty
// when no partition fits.
std::vector<std::int32_t> bottleneck_partition(const PlanConfig& config, const ConfigCosts& costs,
                                               const std::vector<std::int32_t>& in_flight,
                                               double limit_bytes);

// A mirrored kind's partition (ZB-V, DualPipeV: device d holds stages d and 2p - 1 - d;
// DualPipe: model stages d and p - 1 - d, one of each copy), so device 0 holds both the embedding
// and the head (DualPipe: devices 0 and p - 1). The first and the last stage get e layers each (e
// from 1 to an even split's), the rest as even as they allow over the other stages; the e whose
// busiest device works least (forward and backward per micro-batch) wins, the larger e on a tie.
std::vector<std::int32_t> v_partition(const PlanConfig& config, const ConfigCosts& costs);

}  // namespace paci::plan
