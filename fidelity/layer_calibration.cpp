// calibrate_layers: one calibration of single-layer stages (the first with the embedding, the last
// with the head) per threads-per-stage count, split into pieces.
#include "fidelity/layer_calibration.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "fidelity/calibration.hpp"

namespace paci::fidelity {

namespace {

// A stage of the calibration's cost model (fidelity/calibration.hpp: I and W as timed, or half a
// backward each) as a piece.
plan::PieceCalibration piece(const StageCost& c) {
  return {c.forward_s, c.backward_s,       c.input_grad_s, c.weight_grad_s,
          c.update_s,  c.activation_bytes, c.weight_bytes, c.weight_grad_stash_bytes};
}

// a - b, each figure at least 0 (what a stage's extra piece adds to its layer; timing noise can
// make a small difference negative).
plan::PieceCalibration minus(const plan::PieceCalibration& a, const plan::PieceCalibration& b) {
  const auto d = [](double x, double y) { return std::max(0.0, x - y); };
  const auto n = [](std::int64_t x, std::int64_t y) { return std::max<std::int64_t>(0, x - y); };
  return {
      d(a.forward_s, b.forward_s),       d(a.backward_s, b.backward_s),
      d(a.input_grad_s, b.input_grad_s), d(a.weight_grad_s, b.weight_grad_s),
      d(a.update_s, b.update_s),         n(a.activation_bytes, b.activation_bytes),
      n(a.weight_bytes, b.weight_bytes), n(a.weight_grad_stash_bytes, b.weight_grad_stash_bytes)};
}

}  // namespace

plan::LayerCalibration calibrate_layers(const exec::ExecConfig& config,
                                        const exec::CalibrationOptions& options, std::int32_t cores,
                                        std::int32_t max_devices, std::string description) {
  const auto L = static_cast<std::int64_t>(config.config.layers);
  if (L < 3)
    throw InputError(fmt::format(
        "--per-layer needs at least 3 layers (a first, a middle and a last stage of one layer "
        "each), the model has {}",
        L));
  // Single-layer stages: the first (with the embedding), middle ones, the last (with the head);
  // as many as the most stage threads planned, so that the sharing is timed up to that count.
  const std::int64_t n = std::clamp<std::int64_t>(max_devices, 3, L);
  std::vector<model::StageRange> ranges;
  for (std::int64_t s = 0; s + 1 < n; ++s) ranges.push_back({static_cast<std::size_t>(s), 1});
  ranges.push_back({static_cast<std::size_t>(L - 1), 1});
  std::set<std::int32_t> counts;  // the threads a stage gets with 1, 2, 4, ... stage threads
  for (std::int32_t devices = 1; devices <= max_devices; devices *= 2)
    counts.insert(std::max(1, cores / devices));
  plan::LayerCalibration out;
  out.description = std::move(description);
  out.layers = L;
  out.heads = static_cast<std::int64_t>(config.config.heads);
  out.d_model = static_cast<std::int64_t>(config.config.d_model);
  out.seq_len = static_cast<std::int64_t>(config.seq_len);
  out.vocab = static_cast<std::int64_t>(config.config.vocab);
  out.batch = static_cast<std::int64_t>(config.batch);
  out.cores = cores;
  for (const std::int32_t threads : counts) {
    exec::ExecConfig e = config;
    e.ranges = ranges;
    e.threads_per_device = static_cast<std::size_t>(threads);
    exec::CalibrationOptions o = options;
    o.devices = static_cast<std::size_t>(n);
    // Sharing matters where more than one stage thread gets this many threads.
    o.measure_sharing = false;
    for (std::int32_t devices = 2; devices <= max_devices; devices *= 2)
      o.measure_sharing = o.measure_sharing || std::max(1, cores / devices) == threads;
    const exec::Calibration cal = exec::calibrate(e, o);
    const CostModel costs = cost_model_from_calibration(cal, "", {});
    plan::PieceCalibration middle;
    for (std::int64_t s = 1; s + 1 < n; ++s) {
      const plan::PieceCalibration p = piece(costs.stages[static_cast<std::size_t>(s)]);
      const double w = 1.0 / static_cast<double>(n - 2);
      middle.forward_s += w * p.forward_s;
      middle.backward_s += w * p.backward_s;
      middle.input_grad_s += w * p.input_grad_s;
      middle.weight_grad_s += w * p.weight_grad_s;
      middle.update_s += w * p.update_s;
      middle.activation_bytes = p.activation_bytes;
      middle.weight_bytes = p.weight_bytes;
      middle.weight_grad_stash_bytes = p.weight_grad_stash_bytes;
    }
    plan::ThreadsCalibration t;
    t.threads_per_stage = threads;
    t.layer = middle;
    t.embedding = minus(piece(costs.stages.front()), middle);
    t.head = minus(piece(costs.stages.back()), middle);
    t.slowdown_by_count = cal.slowdown_by_count;
    out.threads.push_back(std::move(t));
    if (threads == *counts.begin()) {  // the link, timed with the most threads sharing
      out.link.latency_s = cal.link.latency_s;
      out.link.bandwidth_bytes_per_s = cal.link.bandwidth_bytes_per_s;
      out.message_bytes = cal.stages.front().message_bytes;
    }
  }
  return out;
}

}  // namespace paci::fidelity
