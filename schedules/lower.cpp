// lower(): one pass over every device list, asking DependencyRules what each action receives and
// ConsumerIndex where its output goes. message_bound(): the program's ops in causal order, each
// device carrying a vector clock.
#include "schedules/lower.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <tuple>

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
      const int n = rules.depends_on(a, deps, {d, static_cast<std::int64_t>(i)});
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

namespace {

// A message's identity, the same at its send and its receive.
using MessageId = std::tuple<std::int32_t, std::int64_t, std::int32_t, std::int64_t, int>;
MessageId id_of(const StageMessage& m) {
  return {m.src, m.src_index, m.dst, m.dst_index, static_cast<int>(m.kind)};
}

}  // namespace

std::int64_t message_bound(const LoweredProgram& program) {
  const std::size_t D = program.devices.size();
  // clock[d][e]: how many of device e's ops happen before (or are) device d's last op.
  std::vector<std::vector<std::int64_t>> clock(D, std::vector<std::int64_t>(D, 0));
  std::map<MessageId, std::vector<std::int64_t>> sent;  // the sender's clock, until received
  // Per receiving device: +1 where a message may start to be in flight, -1 after its consumer.
  std::vector<std::vector<std::int64_t>> delta(D);
  std::vector<std::size_t> pc(D, 0), block(D, 0);
  for (std::size_t d = 0; d < D; ++d) delta[d].assign(program.devices[d].ops.size() + 1, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (std::size_t d = 0; d < D; ++d) {
      const DeviceProgram& dp = program.devices[d];
      for (; pc[d] < dp.ops.size(); ++pc[d], progress = true) {
        while (dp.blocks[block[d]].end <= pc[d]) ++block[d];
        const Op& op = dp.ops[pc[d]];
        if (op.kind == OpKind::receive) {
          const auto it = sent.find(id_of(op.message));
          if (it == sent.end()) break;  // not sent yet: the other devices go on
          for (std::size_t e = 0; e < D; ++e) clock[d][e] = std::max(clock[d][e], it->second[e]);
          // In flight from the first op of d that need not precede the send to the consumer.
          ++delta[d][static_cast<std::size_t>(it->second[d])];
          --delta[d][dp.blocks[block[d]].compute + 1];
          sent.erase(it);
        }
        clock[d][d] = static_cast<std::int64_t>(pc[d]) + 1;
        if (op.kind == OpKind::send) sent.emplace(id_of(op.message), clock[d]);
      }
    }
  }
  for (std::size_t d = 0; d < D; ++d)
    if (pc[d] < program.devices[d].ops.size())
      throw std::logic_error("message_bound: a receive of the program is never sent");
  std::int64_t bound = 0;
  for (const auto& changes : delta) {
    std::int64_t in_flight = 0, most = 0;
    for (const std::int64_t c : changes) most = std::max(most, in_flight += c);
    bound += most;
  }
  return bound;
}

}  // namespace paci
