// DependencyRules: the data dependencies of every action kind (see dependencies.hpp).
#include "schedules/dependencies.hpp"

namespace paci {

DependencyRules::DependencyRules(const Schedule& schedule)
    : stages_(schedule.stages), split_(static_cast<std::size_t>(std::max(schedule.stages, 0)), 0) {
  for (const auto& list : schedule.devices)
    for (const Action& a : list)
      if (a.kind == ActionKind::I && a.stage >= 0 && a.stage < stages_)
        split_[static_cast<std::size_t>(a.stage)] = 1;
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
