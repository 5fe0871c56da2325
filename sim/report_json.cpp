// critical_path_json, replay_json.
#include "sim/report_json.hpp"

namespace paci {

ordered_json critical_path_json(const CriticalPath& cp) {
  constexpr std::size_t kMaxListed = 1000;
  ordered_json j;
  j["length_s"] = cp.length_s;
  j["compute_s"] = cp.compute_s;
  j["communication_s"] = cp.communication_s;
  j["actions"] = cp.actions.size();
  j["path"] = ordered_json::array();
  for (std::size_t i = 0; i < cp.actions.size() && i < kMaxListed; ++i)
    j["path"].push_back(to_string(cp.actions[i]));
  j["path_truncated"] = cp.actions.size() > kMaxListed;
  return j;
}

ordered_json replay_json(const std::string& path, double tolerance_s, const ReplayComparison& c) {
  ordered_json j;
  j["report"] = path;
  j["tolerance_s"] = tolerance_s;
  j["measured_makespan_s"] = c.measured_makespan_s;
  j["replayed_makespan_s"] = c.replayed_makespan_s;
  j["makespan_error"] = c.makespan_error();
  j["measured_bubble_ratio"] = c.measured_bubble;
  j["replayed_bubble_ratio"] = c.replayed_bubble;
  j["max_start_error_s"] = c.max_start_error_s;
  j["max_start_error_action"] = to_string(c.worst_action);
  j["actions"] = c.actions;
  j["actions_off"] = c.off;
  j["largest_differences"] = ordered_json::array();
  for (const ReplayMismatch& m : c.largest)
    j["largest_differences"].push_back({{"action", to_string(m.action)},
                                        {"device", m.device},
                                        {"measured_start_s", m.measured_start_s},
                                        {"replayed_start_s", m.replayed_start_s},
                                        {"why", m.why}});
  return j;
}

}  // namespace paci
