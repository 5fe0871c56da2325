// lower(): one pass over every device list, asking DependencyRules what each action receives and
// ConsumerIndex where its output goes.
#include "schedules/lower.hpp"

#include "schedules/consumers.hpp"
#include "schedules/index.hpp"

namespace paci {

LoweredProgram lower(const Schedule& schedule) {
  const ActionIndex index(schedule);
  const DependencyRules rules(schedule);
  const ConsumerIndex consumers(schedule, index, rules);
  const auto device_of = [&](std::int32_t stage) {
    return schedule.placement[static_cast<std::size_t>(stage)];
  };
  LoweredProgram program;
  program.devices.resize(static_cast<std::size_t>(schedule.num_devices()));
  for (std::int32_t d = 0; d < schedule.num_devices(); ++d) {
    const auto& list = schedule.devices[static_cast<std::size_t>(d)];
    DeviceProgram& out = program.devices[static_cast<std::size_t>(d)];
    out.blocks.reserve(list.size());
    out.ops.reserve(list.size() * 2);  // about one message per action, each counted at both ends
    for (std::size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      DeviceProgram::Block block;
      block.first = static_cast<std::uint32_t>(out.ops.size());
      DependencyRules::List deps;
      const int n = rules.depends_on(a, deps);
      for (int j = 0; j < n; ++j) {
        const Dependency& dep = deps[static_cast<std::size_t>(j)];
        if (dep.kind == DependencyKind::local) continue;
        const ActionPos from = index.find(dep.action);
        out.ops.push_back({OpKind::receive,
                           {},
                           {dep.kind, dep.action, a, device_of(dep.action.stage), d, from.index,
                            static_cast<std::int64_t>(i)}});
      }
      block.compute = static_cast<std::uint32_t>(out.ops.size());
      out.ops.push_back({OpKind::compute, a, {}});
      const std::int64_t v = index.vertex(ActionPos{d, static_cast<std::int64_t>(i)});
      for (const Consumer& c : consumers.of(v)) {
        if (c.kind == DependencyKind::local) continue;
        const ActionPos at = index.position(c.vertex);
        const Action& consumer =
            schedule
                .devices[static_cast<std::size_t>(at.device)][static_cast<std::size_t>(at.index)];
        out.ops.push_back(
            {OpKind::send,
             {},
             {c.kind, a, consumer, d, at.device, static_cast<std::int64_t>(i), at.index}});
      }
      block.end = static_cast<std::uint32_t>(out.ops.size());
      out.blocks.push_back(block);
    }
  }
  return program;
}

}  // namespace paci
