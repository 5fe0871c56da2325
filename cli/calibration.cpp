// cost_model_from_calibration.
#include "cli/calibration.hpp"

#include <fmt/format.h>

namespace paci::cli {

CostModel cost_model_from_calibration(const exec::Calibration& c, std::string description) {
  CostModel m;
  m.description = std::move(description);
  m.tokens_per_microbatch = c.tokens_per_microbatch;
  m.default_link.latency_s = c.link.latency_s;
  m.default_link.bandwidth_bytes_per_s = c.link.bandwidth_bytes_per_s;
  const std::size_t P = c.stages.size();
  for (std::size_t s = 0; s < P; ++s) {
    const exec::StageMeasurement& x = c.stages[s];
    StageCost sc;
    sc.forward_s = x.forward_s.median;
    sc.backward_s = x.backward_s.median;
    sc.input_grad_s = x.backward_s.median / 2;
    sc.weight_grad_s = x.backward_s.median / 2;
    sc.update_s = x.update_s.median;
    sc.activation_bytes = x.activation_bytes;
    sc.activation_message_bytes = s + 1 < P ? x.message_bytes : 0;
    sc.gradient_message_bytes = s > 0 ? x.message_bytes : 0;
    sc.weight_bytes = x.weight_bytes;
    sc.gradient_bytes = x.gradient_bytes;
    sc.optimizer_bytes = x.optimizer_bytes;
    m.stages.push_back(sc);
  }
  // The stage threads share this host: one entry per device (stage), slowdown as measured.
  if (c.slowdown_by_count.size() > 1) {
    HostSharing host;
    for (std::size_t s = 0; s < P; ++s) host.devices.push_back(static_cast<std::int32_t>(s));
    host.slowdown_by_count = c.slowdown_by_count;
    host.device_slowdown_by_count = c.stage_slowdown_by_count;
    m.hosts.push_back(host);
  }
  return m;
}

namespace {

ordered_json spread_json(const exec::Spread& s) {
  return {{"min", s.min}, {"median", s.median}, {"max", s.max}, {"samples", s.samples}};
}

std::string spread_text(const exec::Spread& s, double scale, const char* unit) {
  return fmt::format("{:.4g}{} [{:.4g}, {:.4g}]", s.median * scale, unit, s.min * scale,
                     s.max * scale);
}

}  // namespace

ordered_json calibration_json(const exec::Calibration& c) {
  ordered_json j;
  j["repeats"] = c.repeats;
  j["rounds"] = c.rounds;
  j["stable"] = c.stable;
  j["stages"] = ordered_json::array();
  for (std::size_t s = 0; s < c.stages.size(); ++s) {
    const exec::StageMeasurement& m = c.stages[s];
    j["stages"].push_back({{"stage", s},
                           {"forward_s", spread_json(m.forward_s)},
                           {"backward_s", spread_json(m.backward_s)},
                           {"update_s", spread_json(m.update_s)}});
  }
  j["slowdown_by_count"] = ordered_json::array();
  for (std::size_t k = 0; k < c.slowdown_by_count.size(); ++k) {
    ordered_json row = spread_json(c.slowdown_spread.at(k));
    row["computing"] = k + 1;
    j["slowdown_by_count"].push_back(row);
  }
  j["stage_slowdown_by_count"] = c.stage_slowdown_by_count;
  j["link"] = {{"latency_s", c.link.latency_s},
               {"bandwidth_bytes_per_s", c.link.bandwidth_bytes_per_s}};
  return j;
}

std::string calibration_summary(const exec::Calibration& c) {
  std::string out = fmt::format(
      "alone (median [min, max] of {} repeats x {} rounds{}):\n", c.repeats, c.rounds,
      c.stable ? "" : "; NOT settled within the rounds allowed: more --repeats or --max-rounds");
  for (std::size_t s = 0; s < c.stages.size(); ++s) {
    const exec::StageMeasurement& m = c.stages[s];
    out += fmt::format("  stage {}: F {}, B {}, U {}\n", s, spread_text(m.forward_s, 1e3, " ms"),
                       spread_text(m.backward_s, 1e3, " ms"), spread_text(m.update_s, 1e3, " ms"));
  }
  if (c.slowdown_by_count.size() > 1) {
    out += "slowdown with k stages computing at once (median [min, max]):";
    for (std::size_t k = 1; k < c.slowdown_by_count.size(); ++k)
      out += fmt::format(" k={}: {}", k + 1, spread_text(c.slowdown_spread[k], 1.0, "x"));
    out += "\n";
    for (std::size_t s = 0; s < c.stage_slowdown_by_count.size(); ++s) {
      out += fmt::format("  stage {}:", s);
      for (std::size_t k = 1; k < c.stage_slowdown_by_count[s].size(); ++k)
        out += fmt::format(" k={}: {:.4g}x", k + 1, c.stage_slowdown_by_count[s][k]);
      out += "\n";
    }
  }
  out += fmt::format("link: latency {:.3g} s, bandwidth {:.3g} B/s\n", c.link.latency_s,
                     c.link.bandwidth_bytes_per_s);
  return out;
}

}  // namespace paci::cli
