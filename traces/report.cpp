// Report JSON pieces shared by analysis, simulation and measurement.
#include "traces/report.hpp"

#include <fmt/format.h>

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
