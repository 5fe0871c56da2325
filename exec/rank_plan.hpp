// One process per schedule device (a "rank" each, as under mpirun): which messages every
// cross-device link carries and in which order, and the checks a launch makes before it starts.
//
// Point-to-point transports such as NCCL match a link's sends and receives by their order. So a
// schedule runs one process per device without a deadlock when, on every directed link, the
// producer sends its messages in the order the consumer receives them: each link then trails its
// producer's device list and never waits on its consumer (see docs/cuda.md, "One process per
// GPU"). device_links() reads both orders from the lowered program (schedules/lower.hpp) and
// refuses a schedule where they differ, naming the link and the first message out of order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "schedules/dependencies.hpp"
#include "schedules/ir.hpp"

namespace paci::exec {

struct LinkMessage {
  DependencyKind kind = DependencyKind::activation;
  Action producer;
  Action consumer;
  friend bool operator==(const LinkMessage&, const LinkMessage&) = default;
};

// A directed link between two schedule devices and its messages in sending (= receiving) order.
struct DeviceLink {
  std::int32_t src = 0;
  std::int32_t dst = 0;
  std::vector<LinkMessage> messages;
};

// Every directed link that carries at least one message, ordered by (src, dst). The schedule must
// be valid. Throws InputError when a link's receiving order differs from its sending order.
std::vector<DeviceLink> device_links(const Schedule& schedule);

// Throws InputError unless `world_size` processes can run the schedule, one per device and expert
// part (expert parallelism: `expert_parts` processes a device): the process count, and where the
// transport matches a link's messages by their order (NCCL: `in_order`), device_links()'s check.
// A transport that keeps a message received ahead of its turn until its consumer asks (MpiLinks)
// runs any valid schedule.
void check_launch(const Schedule& schedule, std::int32_t world_size, bool in_order = true,
                  std::int32_t expert_parts = 1);

// "1F3 -> 2F3 (activation)": one message, for error text.
std::string to_string(const LinkMessage& message);

}  // namespace paci::exec
