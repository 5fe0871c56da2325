// Static analysis: one pass over every device list, counting versions, in-flight micro-batches and
// (for stash policies) the distinct weight versions that in-flight backwards still need.
#include "schedules/analysis.hpp"

#include <algorithm>
#include <map>

#include "schedules/dependencies.hpp"

namespace paci {

const VersionRecord& Analysis::version(std::int32_t stage, std::int32_t microbatch) const {
  return versions.at(static_cast<std::size_t>(stage * total_microbatches + microbatch));
}

std::int32_t Analysis::max_staleness() const {
  std::int32_t m = 0;
  for (const auto& st : stages) m = std::max(m, st.max_staleness);
  return m;
}

namespace {

struct StageState {
  std::int32_t version = 0;  // current version = U actions so far
  std::int64_t in_flight = 0;
  std::map<std::int32_t, std::int64_t> stashed;  // version -> in-flight micro-batches needing it
};

}  // namespace

Analysis analyze(const Schedule& s) {
  const DependencyRules rules(s);
  const std::int64_t T = s.total_microbatches();
  const bool stash = s.weight_policy != WeightPolicy::current;
  Analysis out;
  out.total_microbatches = T;
  out.stages.resize(static_cast<std::size_t>(s.stages));
  out.versions.resize(static_cast<std::size_t>(s.stages * T));
  for (std::int32_t st = 0; st < s.stages; ++st) {
    auto& sa = out.stages[static_cast<std::size_t>(st)];
    sa.stage = st;
    sa.device = s.placement[static_cast<std::size_t>(st)];
    sa.peak_weight_versions = 1;
    for (std::int64_t m = 0; m < T; ++m) {
      auto& rec = out.versions[static_cast<std::size_t>(st * T + m)];
      rec.stage = st;
      rec.microbatch = static_cast<std::int32_t>(m);
    }
  }
  std::vector<StageState> state(static_cast<std::size_t>(s.stages));
  auto in_range = [&](const Action& a) {
    return a.stage >= 0 && a.stage < s.stages &&
           (a.kind == ActionKind::U || (a.microbatch >= 0 && a.microbatch < T));
  };
  auto live_versions = [](const StageState& ss) {
    return static_cast<std::int64_t>(ss.stashed.size()) + (ss.stashed.count(ss.version) ? 0 : 1);
  };
  for (const auto& list : s.devices) {
    for (const Action& a : list) {
      if (!in_range(a)) continue;
      auto& ss = state[static_cast<std::size_t>(a.stage)];
      auto& sa = out.stages[static_cast<std::size_t>(a.stage)];
      if (a.kind == ActionKind::U) {
        ++ss.version;
        ++sa.updates;
        if (stash) sa.peak_weight_versions = std::max(sa.peak_weight_versions, live_versions(ss));
        continue;
      }
      auto& rec = out.versions[static_cast<std::size_t>(a.stage * T + a.microbatch)];
      if (a.kind == ActionKind::F) {
        rec.v_f = ss.version;
        sa.peak_activations = std::max(sa.peak_activations, ++ss.in_flight);
        if (stash) {
          ++ss.stashed[ss.version];
          sa.peak_weight_versions = std::max(sa.peak_weight_versions, live_versions(ss));
        }
      }
      if (a == rules.backward_read(a.stage, a.microbatch)) {
        rec.v_b = stash ? rec.v_f : ss.version;
        if (stash) {
          auto it = ss.stashed.find(rec.v_f);
          if (it != ss.stashed.end() && --it->second == 0) ss.stashed.erase(it);
        }
      }
      if (a == rules.backward_end(a.stage, a.microbatch)) {
        --ss.in_flight;
        rec.update = ss.version;
      }
    }
  }
  for (auto& sa : out.stages) {
    std::int64_t staleness_sum = 0, delay_sum = 0, counted = 0;
    for (std::int64_t m = 0; m < T; ++m) {
      const auto& rec = out.versions[static_cast<std::size_t>(sa.stage * T + m)];
      if (rec.v_f < 0 || rec.v_b < 0 || rec.update < 0) continue;
      sa.max_staleness = std::max(sa.max_staleness, rec.staleness());
      sa.max_update_delay = std::max(sa.max_update_delay, rec.update_delay());
      staleness_sum += rec.staleness();
      delay_sum += rec.update_delay();
      ++counted;
    }
    if (counted > 0) {
      sa.mean_staleness = static_cast<double>(staleness_sum) / static_cast<double>(counted);
      sa.mean_update_delay = static_cast<double>(delay_sum) / static_cast<double>(counted);
    }
  }
  return out;
}

}  // namespace paci
