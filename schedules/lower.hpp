// Lowering: a validated schedule turned into the instructions each device issues, in order. For
// every action of a device's list: the receives it waits for (in DependencyRules order), the action
// itself, then the sends of its output (in ConsumerIndex order). The executors (CPU threads, one
// process per device, the GPU pipeline) and the launch checks interpret this program; none of them
// derives a message from the dependency rules on its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "schedules/dependencies.hpp"
#include "schedules/ir.hpp"

namespace paci {

// A message between two stages, the same at both ends: sent after `producer` on device `src`,
// received before `consumer` on device `dst` (the same device when both stages sit on one).
struct StageMessage {
  DependencyKind kind = DependencyKind::activation;  // activation or gradient, never local
  Action producer;
  Action consumer;
  std::int32_t src = 0;
  std::int32_t dst = 0;
  std::int64_t src_index = 0;  // the producer's position in src's list
  std::int64_t dst_index = 0;  // the consumer's position in dst's list
  friend bool operator==(const StageMessage&, const StageMessage&) = default;
};

enum class OpKind : std::uint8_t { receive, compute, send };

struct Op {
  OpKind kind = OpKind::compute;
  Action action;         // compute: the action; receive and send: none (see message)
  StageMessage message;  // receive and send: what moves; compute: unused
};

// One device's instructions. Action i of the device's list owns the ops [first, end) of block i:
// its receives, its compute op at `compute`, then its sends.
struct DeviceProgram {
  struct Block {
    std::uint32_t first = 0, compute = 0, end = 0;
  };
  std::vector<Op> ops;
  std::vector<Block> blocks;  // one per action of the device's list

  std::span<const Op> receives(std::size_t action) const {
    const Block& b = blocks[action];
    return {ops.data() + b.first, ops.data() + b.compute};
  }
  std::span<const Op> sends(std::size_t action) const {
    const Block& b = blocks[action];
    return {ops.data() + b.compute + 1, ops.data() + b.end};
  }
};

struct LoweredProgram {
  std::vector<DeviceProgram> devices;  // one per schedule device
};

// The schedule must have passed validate(): every dependency present.
LoweredProgram lower(const Schedule& schedule);

// At most how many messages are sent and not yet consumed at once, under any timing: a message
// counts from its send until its consumer's compute op, the longest a pipeline holds its buffer.
// For each receiving device, a message to it can only be in flight while that device is between
// the ops that happen before its send (a vector clock over the program) and its consumer; the
// bound is the sum over the receiving devices of the most such intervals that overlap. The
// program must be one of a valid schedule (std::logic_error if its receives cannot complete).
std::int64_t message_bound(const LoweredProgram& program);

}  // namespace paci
