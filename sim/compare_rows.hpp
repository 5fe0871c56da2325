// One row of `paci compare` / `paci sweep`: a generated schedule simulated under a cost model, and
// the lists and grids of those commands' flags.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sim/cost_model.hpp"

namespace paci {

struct CompareRow {
  std::string kind;
  std::int32_t stages = 0, microbatches = 0, steps = 0;
  double makespan_s = 0.0;
  double microbatches_per_s = 0.0;
  double tokens_per_s = 0.0;
  double bubble_ratio = 0.0;
  double steady_bubble_ratio = 0.0;    // NaN without a steady window
  double zb_bubble_ratio = 0.0;        // the Zero Bubble paper's (traces/metrics.hpp)
  std::int64_t peak_memory_bytes = 0;  // the largest device's
  std::int32_t max_staleness = 0;
  std::int32_t max_update_delay = 0;
  double speedup_vs_1f1b = 0.0;  // 1f1b's makespan / this makespan (same micro-batches)
};

// Simulates `kind` at (P, M, N) (interleaved: `chunks` stages per device, 0 for its default);
// the speed-up is filled in by the caller.
CompareRow simulate_row(const std::string& kind, std::int32_t stages, std::int32_t microbatches,
                        std::int32_t steps, const CostModel& costs, std::int32_t chunks = 0);

// Kinds from a comma-separated list ("all" or empty: every generator), validated.
std::vector<std::string> parse_kinds(const std::string& text);

// A grid: comma-separated items, each N, A:B or A:B:STEP (inclusive), e.g. "2,4,8" or "1:64".
std::vector<std::int32_t> parse_grid(const std::string& text, const std::string& flag);

// compare and sweep run interleaved with Megatron's usual two chunks per device.
inline constexpr std::int32_t kInterleavedChunks = 2;

// The cost model of `v` chunks per device from one whose stages all cost the same (uniform
// flags): each chunk does a v-th of a stage's work and holds a v-th of its memory; messages keep
// their size. Nothing when the stages differ (a GPT's first and last stages do more): their
// chunks' costs are not a v-th of anything.
std::optional<CostModel> chunk_cost_model(const CostModel& costs, std::int32_t v);

// A two-copy schedule's (DualPipe's) cost model from one copy's: its stages, then the same
// stages again (copy 1's stage P + j holds copy 0's stage j's layers, so its costs); first and
// last stages that differ keep their costs.
CostModel two_copy_cost_model(const CostModel& one_copy);

// Every kind at (P, M, N) against 1F1B's makespan; a kind that cannot run there (2BW with M < P,
// interleaved with M not a multiple of P or without chunk costs) is left out with its reason in
// `skipped`. chunk_costs: interleaved's own cost model (its P·v stages), when the user gave one.
std::vector<CompareRow> compare_rows(const std::vector<std::string>& kinds, std::int32_t P,
                                     std::int32_t M, std::int32_t N, const CostModel& costs,
                                     std::vector<std::string>* skipped,
                                     const CostModel* chunk_costs = nullptr);

std::string csv_header();
std::string csv_row(const CompareRow& row);

}  // namespace paci
