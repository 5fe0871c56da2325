// device_links(): the sending order of every cross-device link (each producer's list, its
// consumers in ConsumerIndex order) against the receiving order (each consumer's list, its
// dependencies in DependencyRules order); the launch checks and the schedule fingerprint.
#include "exec/rank_plan.hpp"

#include <fmt/format.h>
#include <map>
#include <utility>

#include "schedules/consumers.hpp"
#include "schedules/formats.hpp"
#include "schedules/index.hpp"

namespace paci::exec {

std::string to_string(const LinkMessage& m) {
  return fmt::format("{} -> {} ({})", paci::to_string(m.producer), paci::to_string(m.consumer),
                     m.kind == DependencyKind::activation ? "activation" : "gradient");
}

std::vector<DeviceLink> device_links(const Schedule& schedule) {
  const ActionIndex index(schedule);
  const DependencyRules rules(schedule);
  const ConsumerIndex consumers(schedule, index, rules);
  const auto device_of = [&](std::int32_t stage) {
    return schedule.placement[static_cast<std::size_t>(stage)];
  };
  using Pair = std::pair<std::int32_t, std::int32_t>;
  std::map<Pair, std::vector<LinkMessage>> sent, received;
  for (std::int32_t d = 0; d < schedule.num_devices(); ++d) {
    const auto& list = schedule.devices[static_cast<std::size_t>(d)];
    for (std::size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      const std::int64_t v = index.vertex(ActionPos{d, static_cast<std::int64_t>(i)});
      if (a.kind != ActionKind::U)
        for (const Consumer& c : consumers.of(v)) {
          const ActionPos at = index.position(c.vertex);
          if (c.kind == DependencyKind::local || at.device == d) continue;
          const Action& consumer =
              schedule
                  .devices[static_cast<std::size_t>(at.device)][static_cast<std::size_t>(at.index)];
          sent[{d, at.device}].push_back({c.kind, a, consumer});
        }
      DependencyRules::List deps;
      const int n = rules.depends_on(a, deps);
      for (int j = 0; j < n; ++j) {
        const Dependency& dep = deps[static_cast<std::size_t>(j)];
        const std::int32_t src = device_of(dep.action.stage);
        if (dep.kind == DependencyKind::local || src == d) continue;
        received[{src, d}].push_back({dep.kind, dep.action, a});
      }
    }
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

void check_launch(const Schedule& schedule, std::int32_t world_size) {
  if (world_size != schedule.num_devices())
    throw InputError(fmt::format(
        "the launch has {} process{} but the schedule has {} device{}: start one process per "
        "device (e.g. mpirun -np {})",
        world_size, world_size == 1 ? "" : "es", schedule.num_devices(),
        schedule.num_devices() == 1 ? "" : "s", schedule.num_devices()));
  device_links(schedule);
}

std::uint64_t fingerprint(std::string_view text, std::uint64_t hash) {
  for (const char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ull;
  }
  return hash;
}

std::uint64_t schedule_fingerprint(const Schedule& schedule) {
  return fingerprint(write_schedule(schedule, ScheduleFormat::text));
}

}  // namespace paci::exec
