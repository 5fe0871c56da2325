// Static analysis: one pass over every device list, counting versions, in-flight micro-batches and
// (for stash policies) the distinct weight versions that in-flight backwards still need.
#include "schedules/analysis.hpp"

#include <fmt/format.h>

#include <algorithm>

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

std::int32_t Analysis::max_update_delay() const {
  std::int32_t m = 0;
  for (const auto& st : stages) m = std::max(m, st.max_update_delay);
  return m;
}

StageVersionTracker::StageVersionTracker(std::int32_t stage, std::int32_t device,
                                         WeightPolicy policy)
    : stash_(policy != WeightPolicy::current) {
  stats_.stage = stage;
  stats_.device = device;
  stats_.peak_weight_versions = 1;
}

std::int64_t StageVersionTracker::live_versions() const {
  return static_cast<std::int64_t>(stashed_.size()) + (stashed_.count(version_) ? 0 : 1);
}

std::int32_t StageVersionTracker::on_forward() {
  stats_.peak_activations = std::max(stats_.peak_activations, ++in_flight_);
  if (stash_) {
    ++stashed_[version_];
    stats_.peak_weight_versions = std::max(stats_.peak_weight_versions, live_versions());
  }
  return version_;
}

std::int32_t StageVersionTracker::on_backward_read(std::int32_t v_f) {
  if (!stash_) return version_;
  auto it = stashed_.find(v_f);
  if (it != stashed_.end() && --it->second == 0) stashed_.erase(it);
  return v_f;
}

void StageVersionTracker::on_backward_end() {
  --in_flight_;
}

void StageVersionTracker::on_update() {
  ++version_;
  ++stats_.updates;
  if (stash_) stats_.peak_weight_versions = std::max(stats_.peak_weight_versions, live_versions());
}

Analysis analyze(const Schedule& s) {
  const DependencyRules rules(s);
  const std::int64_t T = s.total_microbatches();
  Analysis out;
  out.total_microbatches = T;
  out.stages.resize(static_cast<std::size_t>(s.stages));
  out.versions.resize(static_cast<std::size_t>(s.stages * T));
  std::vector<StageVersionTracker> trackers;
  for (std::int32_t st = 0; st < s.stages; ++st) {
    trackers.emplace_back(st, s.placement[static_cast<std::size_t>(st)], s.weight_policy);
    for (std::int64_t m = 0; m < T; ++m) {
      auto& rec = out.versions[static_cast<std::size_t>(st * T + m)];
      rec.stage = st;
      rec.microbatch = static_cast<std::int32_t>(m);
    }
  }
  for (const auto& list : s.devices) {
    for (const Action& a : list) {
      if (a.stage < 0 || a.stage >= s.stages) continue;
      auto& tracker = trackers[static_cast<std::size_t>(a.stage)];
      if (a.kind == ActionKind::U) {
        tracker.on_update();
        continue;
      }
      if (a.microbatch < 0 || a.microbatch >= T) continue;
      auto& rec = out.versions[static_cast<std::size_t>(a.stage * T + a.microbatch)];
      if (a.kind == ActionKind::F) rec.v_f = tracker.on_forward();
      if (a == rules.backward_read(a.stage, a.microbatch))
        rec.v_b = tracker.on_backward_read(rec.v_f);
      if (a == rules.backward_end(a.stage, a.microbatch)) {
        tracker.on_backward_end();
        rec.update = tracker.version();
      }
    }
  }
  for (std::int32_t st = 0; st < s.stages; ++st)
    out.stages[static_cast<std::size_t>(st)] = trackers[static_cast<std::size_t>(st)].peaks();
  summarize_versions(out);
  return out;
}

void summarize_versions(Analysis& out) {
  const std::int64_t T = out.total_microbatches;
  for (auto& sa : out.stages) {
    sa.max_staleness = 0;
    sa.max_update_delay = 0;
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
}

std::optional<std::string> step_cut_violation(const Schedule& schedule) {
  std::vector<std::int64_t> updates(static_cast<std::size_t>(std::max(schedule.stages, 0)), 0);
  const std::int64_t M = std::max(schedule.microbatches, 1);
  for (const auto& list : schedule.devices) {
    for (const Action& a : list) {
      if (a.stage < 0 || a.stage >= schedule.stages) continue;  // validate() reports these
      std::int64_t& done = updates[static_cast<std::size_t>(a.stage)];
      if (a.kind == ActionKind::U) {
        ++done;
        continue;
      }
      const std::int64_t step = a.microbatch / M;
      if (step > done)
        return fmt::format("stage {} runs {} (step {}) before its update of step {}", a.stage,
                           to_string(a), step, done);
      if (step < done)
        return fmt::format("stage {} runs {} (step {}) after its update of that step", a.stage,
                           to_string(a), step);
    }
  }
  return std::nullopt;
}

}  // namespace paci
