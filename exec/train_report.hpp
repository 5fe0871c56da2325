// paci train --report: the shared report (traces/report.hpp, "source": "measured") of a run: the
// schedule's head, the model and partition, the BLAS, the backend's keys, the step and validation
// losses, the wall time, the GPU pipeline's message buffers, every action's and message's measured
// times (what paci simulate --replay replays) and the versions each action read.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "exec/executor.hpp"
#include "exec/train_setup.hpp"
#include "traces/report.hpp"

namespace paci::exec {

std::string measured_report(const TrainSetup& t, const ExecResult& result, const RunSummary& run,
                            const ordered_json& backend_keys,
                            const std::vector<std::pair<std::size_t, double>>& val_losses);

}  // namespace paci::exec
