// Turning what paci calibrate measured (exec/) into a cost model the simulator reads (sim/).
#pragma once

#include <string>

#include "exec/calibrate.hpp"
#include "sim/cost_model.hpp"

namespace paci::cli {

// Stage durations and bytes as measured; I and W each half a backward (the CPU executor does not
// split backwards); the last stage sends no activation and the first no gradient.
CostModel cost_model_from_calibration(const exec::Calibration& calibration,
                                      std::string description);

}  // namespace paci::cli
