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
  std::string host_slowdown;  // --host-slowdown: "" keeps the model's hosts, "none" drops them
};

void add_cost_options(po::options_description& options, CostFlags& flags);

// The cost model for a schedule with `stages` stages on `devices` devices (default: one each):
// read from --cost, else uniform; --host-slowdown then puts every device on one shared host (or
// drops the hosts with "none"). Throws UsageError when --cost is combined with uniform flags.
CostModel resolve_cost_model(const CostFlags& flags, const po::variables_map& vm,
                             std::int32_t stages, std::int32_t devices = 0);

// A one-line description, e.g. "uniform tf=1 tb=2 tu=0, free links" or the file's description.
std::string describe_costs(const CostFlags& flags, const CostModel& model);

}  // namespace paci::cli
