// The cost-model flags shared by every command that simulates: --cost FILE, or the uniform flags
// --tf --tb --tw --tu --latency --bandwidth (plus byte sizes for memory and messages).
#pragma once

#include <optional>
#include <string>

#include "cli/common.hpp"
#include "sim/cost_model.hpp"

namespace paci::cli {

struct CostFlags {
  std::string cost_path;
  UniformCosts uniform;
};

void add_cost_options(po::options_description& options, CostFlags& flags);

// The cost model for a schedule with `stages` stages: read from --cost, else uniform. Throws
// UsageError when --cost is combined with uniform flags.
CostModel resolve_cost_model(const CostFlags& flags, const po::variables_map& vm,
                             std::int32_t stages);

// A one-line description, e.g. "uniform tf=1 tb=2 tu=0, free links" or the file's description.
std::string describe_costs(const CostFlags& flags, const CostModel& model);

}  // namespace paci::cli
