// ConsumerIndex: the reverse of DependencyRules::depends_on — for every action, the actions that
// wait for it — so a simulator or an executor knows where to send an action's output.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "schedules/dependencies.hpp"
#include "schedules/index.hpp"

namespace paci {

struct Consumer {
  std::uint32_t vertex;  // ActionIndex id of the waiting action
  DependencyKind kind;
};

class ConsumerIndex {
 public:
  // The schedule must have passed validate() (every dependency present).
  ConsumerIndex(const Schedule& schedule, const ActionIndex& index, const DependencyRules& rules);

  std::span<const Consumer> of(std::int64_t vertex) const {
    const auto v = static_cast<std::size_t>(vertex);
    return {consumers_.data() + offsets_[v],
            static_cast<std::size_t>(offsets_[v + 1] - offsets_[v])};
  }

 private:
  std::vector<std::int64_t>
      offsets_;  // CSR: consumers of vertex v are [offsets_[v], offsets_[v+1])
  std::vector<Consumer> consumers_;
};

}  // namespace paci
