// DependencyRules: the data dependencies of every action kind (see dependencies.hpp).
#include "schedules/dependencies.hpp"

#include <algorithm>

namespace paci {

DependencyRules::DependencyRules(const Schedule& schedule)
    : stages_(schedule.stages), split_(static_cast<std::size_t>(std::max(schedule.stages, 0)), 0) {
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
  if (std::find(split_.begin(), split_.end(), kSome) == split_.end()) return;
  some_.resize(split_.size());
  for (const auto& list : schedule.devices)
    for (const Action& a : list)
      if (a.kind == ActionKind::I && in_range(a) &&
          split_[static_cast<std::size_t>(a.stage)] == kSome)
        some_[static_cast<std::size_t>(a.stage)].push_back(a.microbatch);
  for (auto& microbatches : some_) std::sort(microbatches.begin(), microbatches.end());
}

bool DependencyRules::split_backward(std::int32_t stage, std::int32_t microbatch) const {
  const std::uint8_t split = split_[static_cast<std::size_t>(stage)];
  if (split != kSome) return split == kAll;
  const auto& microbatches = some_[static_cast<std::size_t>(stage)];
  return std::binary_search(microbatches.begin(), microbatches.end(), microbatch);
}

int DependencyRules::depends_on(const Action& a, List& out) const {
  int n = 0;
  switch (a.kind) {
    case ActionKind::F:
      if (a.stage > 0)
        out[n++] = {{ActionKind::F, a.stage - 1, a.microbatch}, DependencyKind::activation};
      break;
    case ActionKind::B:
    case ActionKind::I:
      out[n++] = {{ActionKind::F, a.stage, a.microbatch}, DependencyKind::local};
      if (a.stage + 1 < stages_)
        out[n++] = {gradient_producer(a.stage + 1, a.microbatch), DependencyKind::gradient};
      break;
    case ActionKind::W:
      out[n++] = {{ActionKind::I, a.stage, a.microbatch}, DependencyKind::local};
      break;
    case ActionKind::U:
      break;
  }
  return n;
}

}  // namespace paci
