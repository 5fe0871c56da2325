// ConsumerIndex construction: two passes over every action's dependencies (count, then fill).
#include "schedules/consumers.hpp"

#include <stdexcept>

namespace paci {

ConsumerIndex::ConsumerIndex(const Schedule& s, const ActionIndex& index,
                             const DependencyRules& rules) {
  const auto n = static_cast<std::size_t>(index.size());
  offsets_.assign(n + 1, 0);
  DependencyRules::List deps;
  auto producer = [&](const Dependency& d) {
    const std::int64_t p = index.vertex(d.action);
    if (p < 0) throw std::logic_error("ConsumerIndex: schedule lacks " + to_string(d.action));
    return static_cast<std::size_t>(p);
  };
  for (std::int32_t d = 0; d < s.num_devices(); ++d) {
    const auto& list = s.devices[static_cast<std::size_t>(d)];
    for (std::size_t i = 0; i < list.size(); ++i) {
      const int k = rules.depends_on(list[i], deps, {d, static_cast<std::int64_t>(i)});
      for (int j = 0; j < k; ++j) ++offsets_[producer(deps[static_cast<std::size_t>(j)]) + 1];
    }
  }
  for (std::size_t v = 0; v < n; ++v) offsets_[v + 1] += offsets_[v];
  consumers_.resize(static_cast<std::size_t>(offsets_[n]));
  std::vector<std::int64_t> fill(offsets_.begin(), offsets_.end() - 1);
  for (std::int32_t d = 0; d < s.num_devices(); ++d) {
    const auto& list = s.devices[static_cast<std::size_t>(d)];
    for (std::size_t i = 0; i < list.size(); ++i) {
      const int k = rules.depends_on(list[i], deps, {d, static_cast<std::int64_t>(i)});
      const auto v =
          static_cast<std::uint32_t>(index.vertex(ActionPos{d, static_cast<std::int64_t>(i)}));
      for (int j = 0; j < k; ++j) {
        const Dependency& dep = deps[static_cast<std::size_t>(j)];
        consumers_[static_cast<std::size_t>(fill[producer(dep)]++)] = {v, dep.kind};
      }
    }
  }
}

}  // namespace paci
