// Predictions that follow a machine whose speed drifts: right before each measured run a probe
// of the stages alone (exec::Calibrator::probe_alone) says how fast they compute now against the
// pooled calibration (its drift factor); that run's prediction is the simulation with every
// duration scaled by it, and a schedule's prediction is the median of its runs' predictions, as its
// measurement is the median of its runs. And the verdict on each schedule's prediction.
#pragma once

#include <string>
#include <vector>

#include "schedules/ir.hpp"
#include "sim/cost_model.hpp"

namespace paci::fidelity {

// Every stage's F, B, I, W and U durations times `factor` (links, bytes and hosts unchanged).
CostModel scaled_costs(const CostModel& costs, double factor);

// The median of the makespans simulated with `costs` scaled by each factor (non-finite or
// non-positive factors skipped); with no usable factor, the makespan with `costs` as they are.
double drift_corrected_makespan(const Schedule& schedule, const CostModel& costs,
                                const std::vector<double>& factors);

// How a prediction compares with the measured runs: inside their range, or within `tolerance`
// of their median, or neither; and when neither, whether the runs themselves spread wider than
// the tolerance band allows to tell (max - min above 2 x tolerance x median).
struct Verdict {
  double error = 0.0;  // prediction / median - 1
  bool inside_range = false;
  bool within_tolerance = false;
  bool spread_too_wide = false;
  bool holds() const { return inside_range || within_tolerance; }
  // One line for a row that does not hold ("" when it holds).
  std::string note(const std::string& row, double predicted, double median, double min, double max,
                   double tolerance) const;
};
Verdict judge(double predicted, double median, double min, double max, double tolerance);

}  // namespace paci::fidelity
