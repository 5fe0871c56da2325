// cost_model_from_calibration.
#include "fidelity/calibration.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>
#include <algorithm>
#include <map>
#include <stdexcept>
#include "exec/machine.hpp"
#include "model/checkpoint_io.hpp"

namespace paci::fidelity {

CostModel cost_model_from_calibration(const exec::Calibration& c, std::string description,
                                      const std::vector<std::int32_t>& placement) {
  CostModel m;
  m.description = std::move(description);
  m.tokens_per_microbatch = c.tokens_per_microbatch;
  m.default_link.latency_s = c.link.latency_s;
  m.default_link.bandwidth_bytes_per_s = c.link.bandwidth_bytes_per_s;
  const std::size_t P = c.stages.size();
  if (!placement.empty() && placement.size() != P)
    throw std::invalid_argument(
        fmt::format("a placement of {} stages for a calibration of {}", placement.size(), P));
  const auto device_of = [&](std::size_t s) {
    return placement.empty() ? static_cast<std::int32_t>(s) : placement[s];
  };
  for (std::size_t s = 0; s < P; ++s) {
    const exec::StageMeasurement& x = c.stages[s];
    StageCost sc;
    sc.forward_s = x.forward_s.median;
    sc.backward_s = x.backward_s.median;
    // I and W as timed (together a little more than the fused backward: the split keeps copies of
    // the output gradients); half a backward each where they were not timed.
    sc.input_grad_s = x.input_grad_s.samples ? x.input_grad_s.median : x.backward_s.median / 2;
    sc.weight_grad_s = x.weight_grad_s.samples ? x.weight_grad_s.median : x.backward_s.median / 2;
    sc.update_s = x.update_s.median;
    sc.activation_bytes = x.activation_bytes;
    sc.activation_message_bytes = s + 1 < P ? x.message_bytes : 0;
    sc.gradient_message_bytes = s > 0 ? x.message_bytes : 0;
    sc.weight_bytes = x.weight_bytes;
    sc.gradient_bytes = x.gradient_bytes;
    sc.optimizer_bytes = x.optimizer_bytes;
    sc.weight_grad_stash_bytes = x.weight_grad_stash_bytes;
    m.stages.push_back(sc);
  }
  // The devices share this host: one entry per device, slowdown as measured (a device's own curve
  // the mean of its stages').
  if (c.slowdown_by_count.size() > 1) {
    std::int32_t D = 0;
    for (std::size_t s = 0; s < P; ++s) D = std::max(D, device_of(s) + 1);
    HostSharing host;
    for (std::int32_t d = 0; d < D; ++d) host.devices.push_back(d);
    host.slowdown_by_count = c.slowdown_by_count;
    if (!c.stage_slowdown_by_count.empty()) {
      host.device_slowdown_by_count.assign(static_cast<std::size_t>(D), {});
      std::vector<int> stages_on(static_cast<std::size_t>(D), 0);
      for (std::size_t s = 0; s < P; ++s) {
        auto& list = host.device_slowdown_by_count[static_cast<std::size_t>(device_of(s))];
        const auto& measured = c.stage_slowdown_by_count[s];
        list.resize(measured.size(), 0.0);
        for (std::size_t k = 0; k < measured.size(); ++k) list[k] += measured[k];
        ++stages_on[static_cast<std::size_t>(device_of(s))];
      }
      for (std::size_t d = 0; d < host.device_slowdown_by_count.size(); ++d)
        for (double& x : host.device_slowdown_by_count[d]) x /= stages_on[d];
    }
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
  if (!c.largest_move.figure.empty()) {
    ordered_json move = {{"figure", c.largest_move.figure}, {"moved", c.largest_move.moved}};
    move["samples"] = spread_json(c.largest_move.samples);
    j["largest_move_last_round"] = move;
  }
  if (!c.stable) j["not_settled"] = settling_note(c);
  j["stages"] = ordered_json::array();
  for (std::size_t s = 0; s < c.stages.size(); ++s) {
    const exec::StageMeasurement& m = c.stages[s];
    ordered_json stage = {{"stage", s},
                          {"forward_s", spread_json(m.forward_s)},
                          {"backward_s", spread_json(m.backward_s)},
                          {"update_s", spread_json(m.update_s)}};
    if (m.input_grad_s.samples) {
      stage["input_grad_s"] = spread_json(m.input_grad_s);
      stage["weight_grad_s"] = spread_json(m.weight_grad_s);
    }
    j["stages"].push_back(stage);
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

void apply_process_links(CostModel& m, std::span<const exec::PairLinkMeasurement> pairs,
                         std::span<const std::string> nodes) {
  m.links.clear();
  std::vector<double> latency, bandwidth;
  for (const exec::PairLinkMeasurement& p : pairs) {
    const LinkCost cost{p.latency_s.median, p.bandwidth_bytes_per_s};
    m.links.push_back({p.a, p.b, cost});
    m.links.push_back({p.b, p.a, cost});
    latency.push_back(p.latency_s.median);
    bandwidth.push_back(p.bandwidth_bytes_per_s);
  }
  if (!pairs.empty()) {
    m.default_link.latency_s = exec::spread_of(latency).median;
    m.default_link.bandwidth_bytes_per_s = exec::spread_of(bandwidth).median;
  }
  if (m.hosts.size() != 1) return;  // no sharing measured: independent devices
  const HostSharing measured = m.hosts.front();
  std::map<std::string, HostSharing> by_node;
  for (std::size_t d = 0; d < nodes.size(); ++d) {
    HostSharing& h = by_node[nodes[d]];
    h.devices.push_back(static_cast<std::int32_t>(d));
    h.slowdown_by_count = measured.slowdown_by_count;
    if (!measured.device_slowdown_by_count.empty())
      h.device_slowdown_by_count.push_back(measured.device_slowdown_by_count.at(d));
  }
  m.hosts.clear();
  for (auto& [node, host] : by_node)
    if (host.devices.size() > 1) m.hosts.push_back(std::move(host));
}

ordered_json process_links_json(std::span<const exec::PairLinkMeasurement> pairs,
                                std::span<const std::string> nodes) {
  ordered_json j;
  j["nodes"] = std::vector<std::string>(nodes.begin(), nodes.end());
  j["pairs"] = ordered_json::array();
  for (const exec::PairLinkMeasurement& p : pairs)
    j["pairs"].push_back({{"a", p.a},
                          {"b", p.b},
                          {"latency_s", spread_json(p.latency_s)},
                          {"transfer_s", spread_json(p.transfer_s)},
                          {"bytes", p.bytes},
                          {"bandwidth_bytes_per_s", p.bandwidth_bytes_per_s}});
  return j;
}

void process_links_from_json(const ordered_json& j, std::vector<exec::PairLinkMeasurement>& pairs,
                             std::vector<std::string>& nodes) {
  const auto spread = [](const ordered_json& x) {
    return exec::Spread{x.at("min").get<double>(), x.at("median").get<double>(),
                        x.at("max").get<double>(), x.at("samples").get<std::size_t>()};
  };
  nodes = j.at("nodes").get<std::vector<std::string>>();
  pairs.clear();
  for (const ordered_json& x : j.at("pairs"))
    pairs.push_back({x.at("a").get<std::int32_t>(), x.at("b").get<std::int32_t>(),
                     spread(x.at("latency_s")), spread(x.at("transfer_s")),
                     x.at("bytes").get<std::int64_t>(),
                     x.at("bandwidth_bytes_per_s").get<double>()});
}

std::string process_links_summary(std::span<const exec::PairLinkMeasurement> pairs) {
  std::string out = "links between processes (median [min, max]):\n";
  for (const exec::PairLinkMeasurement& p : pairs)
    out += fmt::format("  {} <-> {}: latency {}, {} bytes in {}, {:.3g} GB/s\n", p.a, p.b,
                       spread_text(p.latency_s, 1e6, " us"), p.bytes,
                       spread_text(p.transfer_s, 1e6, " us"), p.bandwidth_bytes_per_s / 1e9);
  return out;
}

std::string settling_note(const exec::Calibration& c) {
  if (c.stable) return "";
  const exec::Calibration::Movement& m = c.largest_move;
  if (m.figure.empty())
    return fmt::format("not settled: {} round(s) cannot show whether the medians stopped moving",
                       c.rounds);
  const bool ratio = m.figure.find("slowdown") != std::string::npos;
  const double scale = ratio ? 1.0 : 1e3;
  const char* unit = ratio ? "x" : " ms";
  const exec::Spread& x = m.samples;
  return fmt::format(
      "not settled after {} rounds: {}'s median still moved {:.1f}% in the last round (its "
      "{} samples {:.4g}-{:.4g}{} around {:.4g}{}: {:+.0f}%/{:+.0f}%); a prediction from this "
      "calibration can be off by that much from the calibration alone, and by more where the "
      "machine's speed moves between calibrating and running (paci calibrate --drift 600 "
      "shows how much it moves here)",
      c.rounds, m.figure, 100 * m.moved, x.samples, x.min * scale, x.max * scale, unit,
      x.median * scale, unit, x.median > 0 ? 100 * (x.min / x.median - 1) : 0.0,
      x.median > 0 ? 100 * (x.max / x.median - 1) : 0.0);
}

std::string calibration_summary(const exec::Calibration& c) {
  std::string out =
      fmt::format("alone (median [min, max] of {} repeats x {} rounds):\n", c.repeats, c.rounds);
  for (std::size_t s = 0; s < c.stages.size(); ++s) {
    const exec::StageMeasurement& m = c.stages[s];
    out += fmt::format("  stage {}: F {}, B {}, U {}", s, spread_text(m.forward_s, 1e3, " ms"),
                       spread_text(m.backward_s, 1e3, " ms"), spread_text(m.update_s, 1e3, " ms"));
    if (m.input_grad_s.samples)
      out += fmt::format("; split: I {}, W {}", spread_text(m.input_grad_s, 1e3, " ms"),
                         spread_text(m.weight_grad_s, 1e3, " ms"));
    out += "\n";
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
  if (!c.stable)
    out += "calibration " + settling_note(c) + " (more --repeats or --max-rounds may settle it)\n";
  return out;
}

std::string describe_calibration(const exec::Calibration& c, const exec::TrainSetup& t) {
  char host[256] = "this machine";
  gethostname(host, sizeof host - 1);
  std::string partition;
  for (const auto& r : t.exec.ranges)
    partition += (partition.empty() ? "" : ",") + std::to_string(r.num_layers);
  if (t.schedule.num_devices() < t.schedule.stages)  // interleaved: say where each stage runs
    partition += fmt::format(" on devices {}", fmt::join(t.schedule.placement, ","));
  std::string sharing;
  for (std::size_t k = 1; k < c.slowdown_by_count.size(); ++k)
    sharing += fmt::format("{}{:.3f}", k == 1 ? "" : ",", c.slowdown_by_count[k]);
  return fmt::format(
      "calibrated on {} ({}): gpt L={} d={} heads={} T={} V={} B={}{}, partition {}, {} thread(s) "
      "per "
      "stage; each stage alone: medians of {} repeats x {} rounds; slowdown with 2.. "
      "stages computing at once: {}{}",
      host, exec::machine_line(), t.exec.config.layers, t.exec.config.d_model, t.exec.config.heads,
      t.exec.seq_len, t.exec.config.vocab, t.exec.batch, model::describe_moe(t.exec.config.moe),
      partition, t.exec.threads_per_device, c.repeats, c.rounds, sharing.empty() ? "-" : sharing,
      c.stable ? "" : "; " + settling_note(c));
}

CalibratedModel calibrate_setup(const exec::TrainSetup& t, const exec::CalibrationOptions& o,
                                const std::vector<exec::PairLinkMeasurement>* pairs,
                                const std::vector<std::string>* nodes) {
  exec::CalibrationOptions options = o;
  options.devices = static_cast<std::size_t>(t.schedule.num_devices());
  CalibratedModel out;
  out.calibration = exec::calibrate(t.exec, options);
  const exec::Calibration& c = out.calibration;
  out.model = cost_model_from_calibration(c, describe_calibration(c, t), t.schedule.placement);
  out.details = calibration_json(c);
  out.details["machine"] = exec::machine_json();
  if (pairs && nodes) {
    apply_process_links(out.model, *pairs, *nodes);
    out.model.description +=
        fmt::format("; links between the {} processes measured over MPI", nodes->size());
    out.details["process_links"] = process_links_json(*pairs, *nodes);
  }
  check_cost_model(out.model);
  return out;
}

}  // namespace paci::fidelity
