// The shared report schema (ARCHITECTURE.md): the pieces that `paci analyze`, `paci simulate` and
// `paci train` all write — the schedule summary, per-stage figures and per-(stage, mb) versions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "schedules/analysis.hpp"
#include "schedules/ir.hpp"
#include "traces/metrics.hpp"

namespace paci {

using ordered_json = nlohmann::ordered_json;

// x as a JSON number, or null when it is NaN or infinite (e.g. no steady window).
ordered_json number_or_null(double x);

// {"kind", "stages", "devices", "microbatches", "steps", "total_microbatches", "weight_policy",
//  "actions"}
ordered_json schedule_summary_json(const Schedule& schedule);

// {"stage", "device", "peak_activations", "peak_weight_versions", "max_staleness",
//  "mean_staleness", "max_update_delay", "mean_update_delay", "updates"}
ordered_json stage_analysis_json(const StageAnalysis& stage);

// What a run (simulated or measured) yields, in the report's terms.
struct RunSummary {
  std::string source;  // "simulated" | "measured"
  TimingMetrics timing;
  Analysis observed;  // versions read and peaks seen during the run
  std::vector<std::int64_t> device_peak_memory_bytes;
  std::int64_t tokens_per_microbatch = 0;
};

// The shared report's top-level keys (ARCHITECTURE.md): source, schedule, makespan_s,
// bubble_ratio, steady_bubble_ratio (null when there is no steady window), steady_window_s,
// throughput, stages[], devices[]. Callers add their own keys, then report_with_versions().
ordered_json run_report_head(const Schedule& schedule, const RunSummary& run);

// Serialises `head` (an object) with a trailing "versions" array of {"stage", "mb", "v_f", "v_b"}
// records, streamed without building a JSON tree for them (millions of records stay cheap).
std::string report_with_versions(const ordered_json& head,
                                 const std::vector<VersionRecord>& versions);

}  // namespace paci
