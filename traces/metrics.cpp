// timing_metrics(): busy time and bubble ratios, whole run and steady window.
#include "traces/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace paci {

TimingMetrics timing_metrics(const Schedule& s, const ActionTimes& times) {
  if (times.size() != s.devices.size())
    throw std::invalid_argument("action times do not match the schedule's devices");
  constexpr double kInf = std::numeric_limits<double>::infinity();
  TimingMetrics m;
  m.device_busy_s.assign(s.devices.size(), 0.0);
  m.stage_busy_s.assign(static_cast<std::size_t>(s.stages), 0.0);
  const std::int64_t last_mb = s.total_microbatches() - 1;
  double first_step_done = -kInf;  // max over stages of the end of U_0
  double last_step_begins = kInf;  // min over stages of the start of the action after U_{N-2}
  double first_stage_last_forward = kInf;
  std::vector<std::int32_t> updates(static_cast<std::size_t>(s.stages), 0);
  for (std::size_t d = 0; d < s.devices.size(); ++d) {
    const auto& list = s.devices[d];
    if (times[d].size() != list.size())
      throw std::invalid_argument("action times do not match the schedule's lists");
    for (std::size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      const ActionTime& t = times[d][i];
      const double duration = t.end_s - t.start_s;
      m.makespan_s = std::max(m.makespan_s, t.end_s);
      m.device_busy_s[d] += duration;
      m.stage_busy_s[static_cast<std::size_t>(a.stage)] += duration;
      if (a.kind == ActionKind::U) {
        const std::int32_t k = updates[static_cast<std::size_t>(a.stage)]++;
        if (k == 0) first_step_done = std::max(first_step_done, t.end_s);
        if (k == s.steps - 2 && i + 1 < list.size())
          last_step_begins = std::min(last_step_begins, times[d][i + 1].start_s);
      }
      if (a.kind == ActionKind::F && a.microbatch == last_mb && s.first_stage(a.stage))
        first_stage_last_forward = std::min(first_stage_last_forward, t.start_s);
    }
  }
  double longest = -1.0;
  for (std::size_t d = 0; d < s.devices.size(); ++d) {
    if (times[d].empty()) continue;
    const double span = times[d].back().end_s - times[d].front().start_s;
    if (span <= longest) continue;
    longest = span;
    double work = 0.0;
    for (std::size_t i = 0; i < times[d].size(); ++i)
      if (s.devices[d][i].kind != ActionKind::U) work += times[d][i].end_s - times[d][i].start_s;
    m.zb_bubble_ratio = span > 0.0 ? 1.0 - work / span : 0.0;
  }
  double busy = 0.0;
  for (double b : m.device_busy_s) busy += b;
  const double devices = static_cast<double>(s.devices.size());
  m.bubble_ratio = m.makespan_s > 0.0 ? 1.0 - busy / (devices * m.makespan_s) : 0.0;

  m.steady_start_s = first_step_done;
  m.steady_end_s = std::min(last_step_begins, first_stage_last_forward);
  if (s.steps < 3 || !(m.steady_end_s > m.steady_start_s) || !std::isfinite(m.steady_start_s)) {
    m.steady_bubble_ratio = std::numeric_limits<double>::quiet_NaN();
    return m;
  }
  double steady_busy = 0.0;
  for (std::size_t d = 0; d < s.devices.size(); ++d)
    for (const ActionTime& t : times[d])
      steady_busy +=
          std::max(0.0, std::min(t.end_s, m.steady_end_s) - std::max(t.start_s, m.steady_start_s));
  m.steady_bubble_ratio = 1.0 - steady_busy / (devices * (m.steady_end_s - m.steady_start_s));
  return m;
}

}  // namespace paci
