// A per-layer calibration of this CPU (`paci calibrate --per-layer`, "format": "paci.layers/1"):
// what one transformer layer, the embedding and the head take here, timed once, for each number of
// threads a stage gets, with the slowdown of k stage threads sharing the machine and the link
// between them. paci plan --cluster FILE with such a file plans the CPU executor's runs: any
// partition of the layers over 1, 2 or 4 stage threads can be costed from it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/cost_model.hpp"

namespace paci::plan {

inline constexpr std::string_view kLayersFormatTag = "paci.layers/1";

// Durations and bytes of one piece: a layer, or what the embedding (first stage) or the head
// (last stage) adds to a stage.
struct PieceCalibration {
  double forward_s = 0, backward_s = 0, input_grad_s = 0, weight_grad_s = 0, update_s = 0;
  std::int64_t activation_bytes = 0, weight_bytes = 0, weight_grad_stash_bytes = 0;
  friend bool operator==(const PieceCalibration&, const PieceCalibration&) = default;
};

struct ThreadsCalibration {
  std::int32_t threads_per_stage = 1;
  PieceCalibration layer, embedding, head;
  // [k-1]: how many times as long an action takes while k stage threads compute at once.
  std::vector<double> slowdown_by_count{1.0};
  friend bool operator==(const ThreadsCalibration&, const ThreadsCalibration&) = default;
};

struct LayerCalibration {
  std::string description;
  // The model and micro-batch it was timed on.
  std::int64_t layers = 0, heads = 0, d_model = 0, seq_len = 0, vocab = 0, batch = 0;
  std::int32_t cores = 1;
  std::int64_t message_bytes = 0;  // an activation or gradient between stages
  LinkCost link;
  std::vector<ThreadsCalibration> threads;  // one per threads-per-stage timed, increasing
  friend bool operator==(const LayerCalibration&, const LayerCalibration&) = default;
};

bool is_layer_calibration(std::string_view json);  // its "format" is paci.layers/1
// InputError naming the first missing or bad field, starting with `source`.
LayerCalibration parse_layer_calibration(std::string_view json, std::string_view source);
std::string write_layer_calibration(const LayerCalibration& calibration);

// The threads a stage gets when `devices` stage threads share the cores (the executor's
// default: cores / devices, at least 1), and the calibration of the largest timed count not above
// it (the smallest timed count when every one is above it).
std::int32_t threads_per_stage(const LayerCalibration& c, std::int32_t devices);
const ThreadsCalibration& threads_for(const LayerCalibration& c, std::int32_t devices);

// The cost model of `layers[s]` layers on each stage, stage s on device placement[s], every device
// sharing this machine: each stage's durations the sum of its pieces (its layers, the embedding on
// the first, the head on the last), the slowdown of sharing as calibrated, the measured link.
CostModel cpu_cost_model(const LayerCalibration& c, const std::vector<std::int32_t>& layers,
                         const std::vector<std::int32_t>& placement);

}  // namespace paci::plan
