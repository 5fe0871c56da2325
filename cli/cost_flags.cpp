// Cost-model flags: parsing and resolution to a CostModel.
#include "cli/cost_flags.hpp"

#include <fmt/format.h>
#include <cmath>

namespace paci::cli {

namespace {
const char* const kUniformFlags[] = {"tf",
                                     "tb",
                                     "tw",
                                     "tu",
                                     "latency",
                                     "bandwidth",
                                     "message-bytes",
                                     "activation-bytes",
                                     "weight-bytes",
                                     "tokens-per-microbatch"};
}

void add_cost_options(po::options_description& options, CostFlags& f) {
  po::options_description costs("cost model (a --cost file, or uniform costs for every stage)");
  auto add_costs = costs.add_options();
  add_costs("cost,c", po::value(&f.cost_path), "cost model JSON (paci costmodel, paci calibrate)");
  add_costs("tf", po::value(&f.uniform.tf)->default_value(1.0, "1"), "forward duration F, seconds");
  add_costs("tb", po::value<double>(), "backward duration B, seconds (default 2·tf)");
  add_costs("tw", po::value<double>(),
            "weight-gradient half W, seconds; then I = tb - tw (default I = W = tb/2)");
  add_costs("tu", po::value(&f.uniform.tu)->default_value(0.0, "0"), "optimizer step U, seconds");
  add_costs("latency", po::value(&f.uniform.latency_s)->default_value(0.0, "0"),
            "link latency, seconds");
  add_costs("bandwidth", po::value<double>(), "link bandwidth, bytes/s (default: infinite)");
  add_costs("message-bytes", po::value(&f.uniform.message_bytes)->default_value(0),
            "bytes of each activation and gradient message");
  add_costs("activation-bytes", po::value(&f.uniform.activation_bytes)->default_value(0),
            "bytes a stage holds per micro-batch in flight");
  add_costs("weight-bytes", po::value(&f.uniform.weight_bytes)->default_value(0),
            "bytes of one copy of a stage's weights (gradients the same, AdamW state twice)");
  add_costs("tokens-per-microbatch", po::value(&f.uniform.tokens_per_microbatch)->default_value(0),
            "tokens in a micro-batch, for tokens/s");
  options.add(costs);
}

CostModel resolve_cost_model(const CostFlags& f, const po::variables_map& vm, std::int32_t stages) {
  if (!f.cost_path.empty()) {
    for (const char* flag : kUniformFlags)
      if (vm.count(flag) && !vm[flag].defaulted())
        throw UsageError(fmt::format("--cost and --{} cannot be combined", flag));
    return read_cost_model(f.cost_path);
  }
  UniformCosts u = f.uniform;
  if (vm.count("tb")) u.tb = vm["tb"].as<double>();
  if (vm.count("tw")) u.tw = vm["tw"].as<double>();
  if (vm.count("bandwidth")) u.bandwidth_bytes_per_s = vm["bandwidth"].as<double>();
  return uniform_cost_model(stages, u);
}

std::string describe_costs(const CostFlags& f, const CostModel& m) {
  if (!f.cost_path.empty())
    return fmt::format("{} ({})", f.cost_path,
                       m.description.empty() ? "no description" : m.description);
  const StageCost& c = m.stages.at(0);
  std::string links = "free links";
  if (m.default_link.latency_s > 0 || std::isfinite(m.default_link.bandwidth_bytes_per_s))
    links = fmt::format("latency {:g} s, bandwidth {:g} B/s", m.default_link.latency_s,
                        m.default_link.bandwidth_bytes_per_s);
  return fmt::format("uniform tf={:g} tb={:g} tu={:g}, {}", c.forward_s, c.backward_s, c.update_s,
                     links);
}

}  // namespace paci::cli
