// Static analysis: what a schedule implies without any timing. A device runs its list in order,
// so the version each F and B reads is the number of that stage's U actions before it.
//   staleness(s,m)    = versions created at s between F(s,m) and the backward that reads weights
//                       (0 under stash and double_buffer: the backward reads the forward's version)
//   update_delay(s,m) = versions created at s between F(s,m) and the U that applies m's gradient
#pragma once

#include <cstdint>
#include <vector>

#include "schedules/ir.hpp"

namespace paci {

struct VersionRecord {
  std::int32_t stage = 0;
  std::int32_t microbatch = 0;
  std::int32_t v_f = -1;     // version read by F(s,m)
  std::int32_t v_b = -1;     // version read by B(s,m) (or I(s,m) when split)
  std::int32_t update = -1;  // index of the U that applies m's gradient (creates version update+1)
  std::int32_t staleness() const { return v_b - v_f; }
  std::int32_t update_delay() const { return update - v_f; }
};

struct StageAnalysis {
  std::int32_t stage = 0;
  std::int32_t device = 0;
  std::int64_t peak_activations = 0;      // micro-batches between F and end of backward, at most
  std::int64_t peak_weight_versions = 0;  // weight versions alive at once, current included
  std::int32_t max_staleness = 0;
  double mean_staleness = 0.0;
  std::int32_t max_update_delay = 0;
  double mean_update_delay = 0.0;
  std::int32_t updates = 0;  // U actions of the stage
};

struct Analysis {
  std::vector<StageAnalysis> stages;    // indexed by stage
  std::vector<VersionRecord> versions;  // ordered by (stage, micro-batch)

  const VersionRecord& version(std::int32_t stage, std::int32_t microbatch) const;
  std::int32_t max_staleness() const;
  std::int64_t total_microbatches = 0;
};

// Analyses a schedule that passed validate(). On an unvalidated schedule the figures are
// meaningless but nothing is read out of bounds.
Analysis analyze(const Schedule& schedule);

}  // namespace paci
