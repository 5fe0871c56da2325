// What happened when: the common record that the simulator predicts and the executor measures,
// and that the Chrome trace writer draws. Times are seconds from the start of the run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "schedules/dependencies.hpp"
#include "schedules/ir.hpp"

namespace paci {

// Start and end of every action, aligned with Schedule::devices (times[d][i] is device d's
// i-th action). Both the simulator and the executor produce it; timing metrics read it.
// free_s: when the device could begin its next action — the end plus the work that follows the
// action on that device (the executor's sends). Not measured (<= end_s) means the end.
struct ActionTime {
  double start_s = 0.0;
  double end_s = 0.0;
  double free_s = 0.0;
  double device_free_s() const { return free_s > end_s ? free_s : end_s; }
};
using ActionTimes = std::vector<std::vector<ActionTime>>;

// One action on a device's compute lane.
struct ComputeSlice {
  Action action;
  std::int32_t device = 0;
  double start_s = 0.0;
  double end_s = 0.0;
  std::int32_t version = 0;  // weight version the action read (after it, for U: the new version)
};

// One message: an activation (F(s,m) -> F(s+1,m)) or a gradient (B/I(s+1,m) -> B/I(s,m)) that
// crosses devices. It occupies the sender's send lane towards dst_device during
// [send_start_s, send_end_s] and the receiver's receive lane from src_device during
// [recv_start_s, recv_end_s]; the consumer may start at recv_end_s.
struct MessageSlice {
  Action producer;  // the action whose output is sent
  Action consumer;  // the action that waits for it
  DependencyKind kind = DependencyKind::activation;
  std::int32_t src_device = 0;
  std::int32_t dst_device = 0;
  std::int64_t bytes = 0;
  double send_start_s = 0.0;
  double send_end_s = 0.0;
  double recv_start_s = 0.0;
  double recv_end_s = 0.0;
};

// A named part of a compute slice, drawn nested inside it on the compute lane (cat "phase"): what
// a simulated action spends on, say, its tensor-parallel collectives or its data-parallel
// reduction. It must lie within one compute slice of its device.
struct PhaseSlice {
  std::int32_t device = 0;
  std::string name;
  double start_s = 0.0;
  double end_s = 0.0;
};

// Memory in use on a device from time_s on (a step function).
struct MemorySample {
  std::int32_t device = 0;
  double time_s = 0.0;
  std::int64_t bytes = 0;
};

struct Timeline {
  std::string source;  // "simulated" or "measured"
  std::int32_t num_devices = 0;
  std::vector<std::string> device_names;  // optional; "device N" when empty
  std::vector<ComputeSlice> compute;      // in any order
  std::vector<MessageSlice> messages;     // in any order
  std::vector<MemorySample> memory;       // in time order per device
  std::vector<PhaseSlice> phases;         // optional, in any order
};

}  // namespace paci
