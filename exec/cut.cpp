// plan_cut: the positions after a given update on every device, moved back past orphan receives
// until the cut is consistent; the messages crossing it; a digest of the lists before it.
#include "exec/cut.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "schedules/lower.hpp"

namespace paci::exec {

namespace {

// FNV-1a over 64-bit words.
void mix(std::uint64_t& h, std::int64_t word) {
  auto w = static_cast<std::uint64_t>(word);
  for (int i = 0; i < 8; ++i, w >>= 8) {
    h ^= w & 0xff;
    h *= 0x100000001b3ULL;
  }
}

}  // namespace

struct CutPlanner::Lowered {
  explicit Lowered(const Schedule& s) : program(lower(s)) {}
  LoweredProgram program;
};

CutPlanner::CutPlanner(const Schedule& schedule)
    : schedule_(schedule), lowered_(std::make_unique<Lowered>(schedule)) {}

CutPlanner::~CutPlanner() = default;

CutPlan plan_cut(const Schedule& schedule, std::int32_t updates) {
  return CutPlanner(schedule).plan(updates);
}

CutPlan CutPlanner::plan(std::int32_t updates) const {
  const Schedule& schedule = schedule_;
  const LoweredProgram& program = lowered_->program;
  if (updates < 1 || updates >= schedule.steps)
    throw InputError(fmt::format("a cut after update {} of a schedule of {} steps: expected 1..{}",
                                 updates, schedule.steps, schedule.steps - 1));
  const auto devices = static_cast<std::size_t>(schedule.num_devices());
  CutPlan plan;
  plan.updates = updates;
  plan.positions.assign(devices, 0);
  for (std::size_t d = 0; d < devices; ++d) {
    std::vector<std::int32_t> seen(static_cast<std::size_t>(schedule.stages), 0);
    const auto& list = schedule.devices[d];
    for (std::size_t i = 0; i < list.size(); ++i)
      if (list[i].kind == ActionKind::U &&
          ++seen[static_cast<std::size_t>(list[i].stage)] == updates)
        plan.positions[d] = static_cast<std::int64_t>(i) + 1;
  }
  // Move receivers back until nothing received before the cut is sent after it. Positions only
  // decrease, so this ends.
  for (bool changed = true; changed;) {
    changed = false;
    for (const DeviceProgram& device : program.devices)
      for (const Op& op : device.ops) {
        if (op.kind != OpKind::send) continue;
        const StageMessage& m = op.message;
        auto& cut = plan.positions[static_cast<std::size_t>(m.dst)];
        if (m.src_index >= plan.positions[static_cast<std::size_t>(m.src)] && m.dst_index < cut) {
          cut = m.dst_index;
          changed = true;
        }
      }
  }
  for (const DeviceProgram& device : program.devices)
    for (const Op& op : device.ops) {
      const StageMessage& m = op.message;
      if (op.kind != OpKind::send ||
          m.src_index >= plan.positions[static_cast<std::size_t>(m.src)] ||
          m.dst_index < plan.positions[static_cast<std::size_t>(m.dst)])
        continue;
      plan.messages.push_back(
          {{m.kind, m.producer.stage, m.producer.microbatch}, m.src, m.dst, m.src_index});
    }
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const char c : schedule.kind) mix(h, c);
  mix(h, static_cast<std::int64_t>(schedule.weight_policy));
  mix(h, schedule.stages);
  mix(h, schedule.microbatches);
  for (std::int32_t p : schedule.placement) mix(h, p);
  for (std::size_t d = 0; d < devices; ++d) {
    mix(h, plan.positions[d]);
    for (std::int64_t i = 0; i < plan.positions[d]; ++i) {
      const Action& a = schedule.devices[d][static_cast<std::size_t>(i)];
      mix(h, (static_cast<std::int64_t>(a.kind) << 32) ^ a.stage);
      mix(h, a.microbatch);
    }
  }
  plan.digest = h;
  return plan;
}

}  // namespace paci::exec
