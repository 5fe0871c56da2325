// DependencyRules: the data dependencies of every action kind (see dependencies.hpp).
#include "schedules/dependencies.hpp"

#include <algorithm>
#include <stdexcept>

namespace paci {

std::string_view to_string(DependencyKind kind) {
  switch (kind) {
    case DependencyKind::local:
      return "local";
    case DependencyKind::activation:
      return "activation";
    case DependencyKind::gradient:
      return "gradient";
    case DependencyKind::twin_gradients:
      return "twin gradients";
  }
  return "message";
}

DependencyRules::DependencyRules(const Schedule& schedule)
    : stages_(schedule.stages),
      per_copy_(schedule.stages_per_copy()),
      copies_(schedule.copies == 2),
      split_(static_cast<std::size_t>(std::max(schedule.stages, 0)), 0) {
  std::vector<std::uint8_t> full(split_.size(), 0);
  const auto in_range = [&](const Action& a) { return a.stage >= 0 && a.stage < stages_; };
  for (const auto& list : schedule.devices)
    for (const Action& a : list) {
      if (!in_range(a)) continue;
      if (a.kind == ActionKind::I) split_[static_cast<std::size_t>(a.stage)] = kAll;
      if (a.kind == ActionKind::B) full[static_cast<std::size_t>(a.stage)] = 1;
    }
  for (std::size_t st = 0; st < split_.size(); ++st)
    if (split_[st] == kAll && full[st]) split_[st] = kSome;
  if (std::find(split_.begin(), split_.end(), kSome) != split_.end()) {
    some_.resize(split_.size());
    for (const auto& list : schedule.devices)
      for (const Action& a : list)
        if (a.kind == ActionKind::I && in_range(a) &&
            split_[static_cast<std::size_t>(a.stage)] == kSome)
          some_[static_cast<std::size_t>(a.stage)].push_back(a.microbatch);
    for (auto& microbatches : some_) std::sort(microbatches.begin(), microbatches.end());
  }
  if (copies_) find_twin_ends(schedule);
}

void DependencyRules::find_twin_ends(const Schedule& schedule) {
  // Per stage and step: the backward end its device runs last (a device runs its list in order).
  const auto S = static_cast<std::size_t>(stages_);
  const auto steps = static_cast<std::size_t>(std::max(schedule.steps, 0));
  std::vector<Action> last(S * steps, Action{ActionKind::U, -1, -1});
  for (const auto& list : schedule.devices)
    for (const Action& a : list) {
      if (a.kind == ActionKind::U || a.stage < 0 || a.stage >= stages_ || a.microbatch < 0 ||
          !(a == backward_end(a.stage, a.microbatch)))
        continue;
      const auto step = static_cast<std::size_t>(a.microbatch / schedule.microbatches);
      if (step < steps) last[static_cast<std::size_t>(a.stage) * steps + step] = a;
    }
  std::vector<std::size_t> updates(S, 0);
  for (std::int32_t d = 0; d < schedule.num_devices(); ++d) {
    const auto& list = schedule.devices[static_cast<std::size_t>(d)];
    for (std::size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      if (a.kind != ActionKind::U || a.stage < 0 || a.stage >= stages_) continue;
      const std::size_t step = updates[static_cast<std::size_t>(a.stage)]++;
      const Action end = step < steps
                             ? last[static_cast<std::size_t>(schedule.twin(a.stage)) * steps + step]
                             : Action{ActionKind::U, -1, -1};
      // A step without a twin backward end (an incomplete schedule) waits for nothing here:
      // validate() names what is missing.
      if (end.stage >= 0) twin_end_.emplace(key({d, static_cast<std::int64_t>(i)}), end);
    }
  }
}

bool DependencyRules::split_backward(std::int32_t stage, std::int32_t microbatch) const {
  const std::uint8_t split = split_[static_cast<std::size_t>(stage)];
  if (split != kSome) return split == kAll;
  const auto& microbatches = some_[static_cast<std::size_t>(stage)];
  return std::binary_search(microbatches.begin(), microbatches.end(), microbatch);
}

int DependencyRules::depends_on(const Action& a, List& out, ActionPos where) const {
  int n = 0;
  switch (a.kind) {
    case ActionKind::F:
      if (a.stage % per_copy_ > 0)
        out[n++] = {{ActionKind::F, a.stage - 1, a.microbatch}, DependencyKind::activation};
      break;
    case ActionKind::B:
    case ActionKind::I:
      out[n++] = {{ActionKind::F, a.stage, a.microbatch}, DependencyKind::local};
      if (a.stage % per_copy_ + 1 < per_copy_)
        out[n++] = {gradient_producer(a.stage + 1, a.microbatch), DependencyKind::gradient};
      break;
    case ActionKind::W:
      out[n++] = {{ActionKind::I, a.stage, a.microbatch}, DependencyKind::local};
      break;
    case ActionKind::U:
      if (!copies_) break;
      if (!where.valid())
        throw std::logic_error("depends_on: a U of a two-copy schedule needs its place");
      if (const auto it = twin_end_.find(key(where)); it != twin_end_.end())
        out[n++] = {it->second, DependencyKind::twin_gradients};
      break;
  }
  return n;
}

}  // namespace paci
