// device_links(): the sending order of every cross-device link against its receiving order, both
// read from the lowered program; the launch checks.
#include "exec/rank_plan.hpp"

#include <fmt/format.h>
#include <map>
#include <utility>

#include "schedules/lower.hpp"

namespace paci::exec {

std::string to_string(const LinkMessage& m) {
  return fmt::format("{} -> {} ({})", paci::to_string(m.producer), paci::to_string(m.consumer),
                     paci::to_string(m.kind));
}

std::vector<DeviceLink> device_links(const Schedule& schedule) {
  const LoweredProgram program = lower(schedule);
  using Pair = std::pair<std::int32_t, std::int32_t>;
  std::map<Pair, std::vector<LinkMessage>> sent, received;
  for (const DeviceProgram& device : program.devices)
    for (const Op& op : device.ops) {
      const StageMessage& m = op.message;
      if (op.kind == OpKind::compute || m.src == m.dst) continue;
      auto& link = op.kind == OpKind::send ? sent : received;
      link[{m.src, m.dst}].push_back({m.kind, m.producer, m.consumer});
    }
  std::vector<DeviceLink> links;
  for (auto& [pair, messages] : sent) {
    const auto& in = received[pair];
    for (std::size_t k = 0; k < std::max(messages.size(), in.size()); ++k) {
      if (k < messages.size() && k < in.size() && messages[k] == in[k]) continue;
      throw InputError(fmt::format(
          "the schedule cannot run one process per device: on the link from device {} to device "
          "{}, message {} is sent as {} but received as {} (a transport that matches messages in "
          "order, like NCCL, would deadlock)",
          pair.first, pair.second, k + 1, k < messages.size() ? to_string(messages[k]) : "nothing",
          k < in.size() ? to_string(in[k]) : "nothing"));
    }
    links.push_back({pair.first, pair.second, std::move(messages)});
  }
  return links;
}

void check_launch(const Schedule& schedule, std::int32_t world_size, bool in_order,
                  std::int32_t expert_parts) {
  if (expert_parts < 1) throw std::invalid_argument("check_launch: expert_parts must be positive");
  const std::int32_t devices = schedule.num_devices();
  if (expert_parts > 1 && world_size != devices * expert_parts)
    throw InputError(fmt::format(
        "the launch has {} process{} but the schedule's {} device{} times --ep {} need {}: start "
        "one process per device and expert part (mpirun -np {})",
        world_size, world_size == 1 ? "" : "es", devices, devices == 1 ? "" : "s", expert_parts,
        devices * expert_parts, devices * expert_parts));
  if (world_size != devices * expert_parts)
    throw InputError(fmt::format(
        "the launch has {} process{} but the schedule has {} device{}: start one process per "
        "device (e.g. mpirun -np {})",
        world_size, world_size == 1 ? "" : "es", devices, devices == 1 ? "" : "s", devices));
  if (in_order) device_links(schedule);
}

}  // namespace paci::exec
