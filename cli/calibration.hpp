// Turning what paci calibrate measured (exec/) into a cost model the simulator reads (sim/).
#pragma once

#include <string>

#include "exec/calibrate.hpp"
#include "sim/cost_model.hpp"
#include "traces/report.hpp"

namespace paci::cli {

// Stage durations (alone) and bytes as measured; I and W each half a backward (the CPU executor
// does not split backwards); the last stage sends no activation and the first no gradient; with a
// measured slowdown, every stage's device on one shared host (CostModel::hosts).
CostModel cost_model_from_calibration(const exec::Calibration& calibration,
                                      std::string description);

// Every measured figure with its spread, for a JSON output (paci calibrate --details, fidelity).
ordered_json calibration_json(const exec::Calibration& calibration);

// A few lines for people: per stage F, B, U median [min, max], the slowdown per k, the link.
std::string calibration_summary(const exec::Calibration& calibration);

}  // namespace paci::cli
