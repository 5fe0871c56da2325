// Calibration: measures on this machine what the simulator's cost model needs — per stage the
// durations of F, B and U (medians of repeats, all stages running at once as in training) and the
// bytes it holds and sends; the in-process transport's latency and bandwidth.
#pragma once

#include <cstdint>
#include <vector>

#include "exec/executor.hpp"

namespace paci::exec {

struct StageMeasurement {
  double forward_s = 0.0, backward_s = 0.0, update_s = 0.0;  // medians
  std::int64_t activation_bytes = 0;                         // one micro-batch's activation slot
  std::int64_t message_bytes = 0;  // an activation or gradient sent to a neighbour
  std::int64_t weight_bytes = 0, gradient_bytes = 0, optimizer_bytes = 0;
};

struct LinkMeasurement {
  double latency_s = 0.0;              // one-way, for a one-float message (median)
  double bandwidth_bytes_per_s = 0.0;  // from the median time of activation-sized messages
};

struct Calibration {
  std::vector<StageMeasurement> stages;
  LinkMeasurement link;
  std::int64_t tokens_per_microbatch = 0;
  std::size_t repeats = 0;
};

// Uses config's shape, partition (one range per stage), threads and data; `repeats` timed
// forward/backward pairs per stage after one warm-up, and as many updates.
Calibration calibrate(const ExecConfig& config, std::size_t repeats);

}  // namespace paci::exec
