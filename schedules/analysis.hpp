// Static analysis: what a schedule implies without any timing. A device runs its list in order,
// so the version each F and B reads is the number of that stage's U actions before it.
//   staleness(s,m)    = versions created at s between F(s,m) and the backward that reads weights
//                       (0 under stash and double_buffer: the backward reads the forward's version)
//   update_delay(s,m) = versions created at s between F(s,m) and the U that applies m's gradient
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
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
  std::int32_t max_update_delay() const;
  // How far behind a gradient can be, as one number: the larger of the two maxima (0 exactly for
  // the flushed schedules; PACI 1, 2BW 1, PipeDream P - 1).
  std::int32_t max_lag() const { return std::max(max_staleness(), max_update_delay()); }
  std::int64_t total_microbatches = 0;
};

// Version bookkeeping of one stage as its device runs its list: which version each F and B
// reads, how many micro-batches are in flight, which weight versions must stay alive. analyze()
// drives it in list order; the simulator drives it at event times (the same order per device).
class StageVersionTracker {
 public:
  StageVersionTracker(std::int32_t stage, std::int32_t device, WeightPolicy policy);

  std::int32_t on_forward();  // returns v_f
  // The backward reads weights (B, or I when split); returns v_b. Under stash policies it reads
  // v_f and the stashed copy may be released.
  std::int32_t on_backward_read(std::int32_t v_f);
  void on_backward_end();  // activations freed (B, or W when split)
  void on_update();        // U: a new current version
  std::int32_t version() const { return version_; }
  std::int64_t in_flight() const { return in_flight_; }
  std::int64_t live_versions() const;  // current included
  const StageAnalysis& peaks() const { return stats_; }

 private:
  StageAnalysis stats_;
  bool stash_;
  std::int32_t version_ = 0;
  std::int64_t in_flight_ = 0;
  std::map<std::int32_t, std::int64_t> stashed_;  // version -> in-flight micro-batches needing it
};

// Fills each stage's max/mean staleness and update delay from `versions` (records with a
// negative field are skipped). analyze() calls it; so do the simulator and the executor, which
// record the versions their runs actually read.
void summarize_versions(Analysis& analysis);

// Analyses a schedule that passed validate(). On an unvalidated schedule the figures are
// meaningless but nothing is read out of bounds.
Analysis analyze(const Schedule& schedule);

// Whether every optimizer step is a cut of the pipeline: each stage runs every action of a step's
// micro-batches before its update of that step, and none of a later step's before it, so that
// nothing is in flight between steps (GPipe, 1F1B, ZB-H1, ZB-H2, interleaved, ZB-V: they flush;
// PACI, PipeDream and 2BW run the next step's forwards before the update). A checkpoint taken at
// each stage's update is then the state of the whole run at that step. Returns the first action
// that breaks it, described ("stage 0 runs 0F2 (step 1) before its update of step 0"), or nullopt.
std::optional<std::string> step_cut_violation(const Schedule& schedule);

}  // namespace paci
