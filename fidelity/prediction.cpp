// scaled_costs, drift_corrected_makespan, judge.
#include "fidelity/prediction.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "sim/engine.hpp"

namespace paci::fidelity {

CostModel scaled_costs(const CostModel& costs, double factor) {
  CostModel out = costs;
  for (StageCost& s : out.stages) {
    s.forward_s *= factor;
    s.backward_s *= factor;
    s.input_grad_s *= factor;
    s.weight_grad_s *= factor;
    s.update_s *= factor;
    s.forward_comm_s *= factor;
    s.backward_comm_s *= factor;
  }
  return out;
}

double drift_corrected_makespan(const Schedule& schedule, const CostModel& costs,
                                const std::vector<double>& factors) {
  SimOptions options;
  options.record_timeline = false;
  std::vector<double> makespans;
  for (const double f : factors)
    if (std::isfinite(f) && f > 0)
      makespans.push_back(
          simulate(schedule, scaled_costs(costs, f), options).critical_path.length_s);
  if (makespans.empty()) return simulate(schedule, costs, options).critical_path.length_s;
  std::sort(makespans.begin(), makespans.end());
  const std::size_t n = makespans.size();
  return n % 2 ? makespans[n / 2] : 0.5 * (makespans[n / 2 - 1] + makespans[n / 2]);
}

Verdict judge(double predicted, double median, double min, double max, double tolerance) {
  Verdict v;
  v.error = predicted / median - 1.0;
  v.inside_range = predicted >= min && predicted <= max;
  v.within_tolerance = std::abs(v.error) <= tolerance;
  v.spread_too_wide = (max - min) > 2.0 * tolerance * median;
  return v;
}

std::string Verdict::note(const std::string& row, double predicted, double median, double min,
                          double max, double tolerance) const {
  if (holds()) return "";
  const std::string what = fmt::format(
      "{}: predicted {:.3f} s, {:+.1f}% from the measured median {:.3f} s and outside the runs' "
      "range [{:.3f}, {:.3f}]",
      row, predicted, 100 * error, median, min, max);
  if (spread_too_wide)
    return what + fmt::format(
                      "; the runs themselves spread {:.1f}% of their median (max - min), wider "
                      "than the ±{:.0f}% band: on this machine this row cannot be told apart from "
                      "its own noise",
                      100 * (max - min) / median, 100 * tolerance);
  return what + fmt::format("; the runs spread only {:.1f}% of their median: a miss of the model",
                            100 * (max - min) / median);
}

}  // namespace paci::fidelity
