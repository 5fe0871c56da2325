// Report JSON pieces shared by analysis, simulation and measurement.
#include "traces/report.hpp"

#include <fmt/format.h>
#include <cmath>

namespace paci {

ordered_json schedule_summary_json(const Schedule& s) {
  ordered_json j;
  j["kind"] = s.kind;
  j["stages"] = s.stages;
  j["devices"] = s.num_devices();
  j["microbatches"] = s.microbatches;
  j["steps"] = s.steps;
  j["total_microbatches"] = s.total_microbatches();
  j["weight_policy"] = std::string(to_string(s.weight_policy));
  j["actions"] = s.num_actions();
  return j;
}

ordered_json stage_analysis_json(const StageAnalysis& st) {
  ordered_json j;
  j["stage"] = st.stage;
  j["device"] = st.device;
  j["peak_activations"] = st.peak_activations;
  j["peak_weight_versions"] = st.peak_weight_versions;
  j["max_staleness"] = st.max_staleness;
  j["mean_staleness"] = st.mean_staleness;
  j["max_update_delay"] = st.max_update_delay;
  j["mean_update_delay"] = st.mean_update_delay;
  j["updates"] = st.updates;
  return j;
}

ordered_json number_or_null(double x) {
  return std::isfinite(x) ? ordered_json(x) : ordered_json();
}

ordered_json run_report_head(const Schedule& s, const RunSummary& run) {
  const TimingMetrics& t = run.timing;
  ordered_json j;
  j["source"] = run.source;
  j["schedule"] = schedule_summary_json(s);
  j["makespan_s"] = t.makespan_s;
  j["bubble_ratio"] = t.bubble_ratio;
  j["steady_bubble_ratio"] = number_or_null(t.steady_bubble_ratio);
  j["zb_bubble_ratio"] = t.zb_bubble_ratio;
  j["steady_window_s"] = std::isfinite(t.steady_bubble_ratio)
                             ? ordered_json::array({t.steady_start_s, t.steady_end_s})
                             : ordered_json();
  const double mb = static_cast<double>(s.total_microbatches());
  j["throughput"]["microbatches_per_s"] = t.makespan_s > 0 ? mb / t.makespan_s : 0.0;
  j["throughput"]["tokens_per_s"] =
      t.makespan_s > 0 ? mb * static_cast<double>(run.tokens_per_microbatch) / t.makespan_s : 0.0;
  j["stages"] = ordered_json::array();
  for (const StageAnalysis& st : run.observed.stages) {
    const auto device = static_cast<std::size_t>(st.device);
    ordered_json row;
    row["stage"] = st.stage;
    row["device"] = st.device;
    row["busy_s"] = t.stage_busy_s.at(static_cast<std::size_t>(st.stage));
    row["utilization"] =
        t.makespan_s > 0 ? t.stage_busy_s[static_cast<std::size_t>(st.stage)] / t.makespan_s : 0.0;
    row["peak_memory_bytes"] = run.device_peak_memory_bytes.at(device);
    row["peak_activations"] = st.peak_activations;
    row["peak_weight_versions"] = st.peak_weight_versions;
    row["max_staleness"] = st.max_staleness;
    row["mean_staleness"] = st.mean_staleness;
    row["max_update_delay"] = st.max_update_delay;
    row["updates"] = st.updates;
    j["stages"].push_back(row);
  }
  j["devices"] = ordered_json::array();
  for (std::size_t d = 0; d < t.device_busy_s.size(); ++d) {
    ordered_json row;
    row["device"] = d;
    row["busy_s"] = t.device_busy_s[d];
    row["utilization"] = t.makespan_s > 0 ? t.device_busy_s[d] / t.makespan_s : 0.0;
    row["peak_memory_bytes"] = run.device_peak_memory_bytes.at(d);
    j["devices"].push_back(row);
  }
  return j;
}

std::string report_with_versions(const ordered_json& head,
                                 const std::vector<VersionRecord>& versions) {
  std::string text = head.dump(2);
  // head.dump ends with "\n}"; reopen the object to append the versions array.
  if (text.size() < 2 || text.back() != '}') throw std::logic_error("report head is not an object");
  text.pop_back();
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  const bool empty_head = text.back() == '{';
  text.reserve(text.size() + versions.size() * 48 + 32);
  text += empty_head ? "\n  \"versions\": [" : ",\n  \"versions\": [";
  for (std::size_t i = 0; i < versions.size(); ++i) {
    const auto& v = versions[i];
    fmt::format_to(std::back_inserter(text),
                   "{}\n    {{\"stage\": {}, \"mb\": {}, \"v_f\": {}, \"v_b\": {}}}", i ? "," : "",
                   v.stage, v.microbatch, v.v_f, v.v_b);
  }
  text += versions.empty() ? "]\n}\n" : "\n  ]\n}\n";
  return text;
}

}  // namespace paci
