// Cost-model flags: parsing and resolution to a CostModel.
#include "cli/cost_flags.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <algorithm>
#include <cmath>

namespace paci::cli {

namespace {
const char* const kUniformFlags[] = {"tf",
                                     "tb",
                                     "tw",
                                     "tfb",
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
  add_costs("tfb", po::value<double>(),
            "an overlapped forward and backward pair (DualPipe's F&B), seconds, between "
            "max(tf, tb) and tf + tb (default tf + tb: nothing hidden)");
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
  add_costs("host-slowdown", po::value(&f.host_slowdown),
            "every device shares one host: how many times slower an action runs with k = 1, 2, "
            "... devices computing at once, e.g. 1,1.3,2,2.6 (none: independent devices, even if "
            "the --cost file has hosts)");
  options.add(costs);
}

namespace {

// --host-slowdown's list: numbers > 0, comma-separated.
std::vector<double> parse_slowdowns(const std::string& text) {
  std::vector<double> out;
  for (const std::string& item : split_commas(text)) {
    std::size_t used = 0;
    double x = 0;
    try {
      x = std::stod(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || !std::isfinite(x) || !(x > 0))
      throw UsageError(fmt::format(
          "--host-slowdown must list numbers > 0 such as 1,1.3,2 (got '{}' in '{}')", item, text));
    out.push_back(x);
  }
  return out;
}

}  // namespace

CostModel resolve_cost_model(const CostFlags& f, const po::variables_map& vm, std::int32_t stages,
                             std::int32_t devices) {
  CostModel model;
  if (!f.cost_path.empty()) {
    for (const char* flag : kUniformFlags)
      if (vm.count(flag) && !vm[flag].defaulted())
        throw UsageError(fmt::format("--cost and --{} cannot be combined", flag));
    model = read_cost_model(f.cost_path);
  } else {
    UniformCosts u = f.uniform;
    if (vm.count("tb")) u.tb = vm["tb"].as<double>();
    if (vm.count("tw")) u.tw = vm["tw"].as<double>();
    if (vm.count("tfb")) u.tfb = vm["tfb"].as<double>();
    if (vm.count("bandwidth")) u.bandwidth_bytes_per_s = vm["bandwidth"].as<double>();
    model = uniform_cost_model(stages, u);
  }
  if (f.host_slowdown == "none") {
    model.hosts.clear();
  } else if (vm.count("host-slowdown")) {  // given, even empty: an empty list is refused
    HostSharing host;
    host.slowdown_by_count = parse_slowdowns(f.host_slowdown);
    for (std::int32_t d = 0; d < (devices > 0 ? devices : stages); ++d) host.devices.push_back(d);
    model.hosts = {host};
  }
  return model;
}

std::string describe_costs(const CostFlags& f, const CostModel& m) {
  std::string hosts;
  for (const HostSharing& h : m.hosts)
    hosts += fmt::format(", {} devices share a host (slowdown {})", h.devices.size(),
                         fmt::join(h.slowdown_by_count, ","));
  if (!f.cost_path.empty())
    return fmt::format("{} ({}){}", f.cost_path,
                       m.description.empty() ? "no description" : m.description,
                       f.host_slowdown.empty() ? ""
                       : hosts.empty()         ? "; no hosts"
                                               : ";" + hosts.substr(1));
  const StageCost& c = m.stages.at(0);
  std::string links = "free links";
  if (m.default_link.latency_s > 0 || std::isfinite(m.default_link.bandwidth_bytes_per_s))
    links = fmt::format("latency {:g} s, bandwidth {:g} B/s", m.default_link.latency_s,
                        m.default_link.bandwidth_bytes_per_s);
  const std::string pair = c.forward_comm_s > 0 || c.backward_comm_s > 0
                               ? fmt::format(" tfb={:g}", pair_duration_s(c, c))
                               : "";
  return fmt::format("uniform tf={:g} tb={:g} tu={:g}{}, {}{}", c.forward_s, c.backward_s,
                     c.update_s, pair, links, hosts);
}

}  // namespace paci::cli
