// The simulator's results as the report JSON carries them: the critical path, and a replay's
// comparison with the measured run.
#pragma once

#include <string>

#include "sim/engine.hpp"
#include "sim/replay.hpp"
#include "traces/report.hpp"

namespace paci {

// {"length_s", "compute_s", "communication_s", "actions", "path": the first 1,000 actions,
//  "path_truncated"}
ordered_json critical_path_json(const CriticalPath& path);

// The replay of the measured report `path` with every action's start within `tolerance_s`:
// makespans, bubbles, the largest start difference and its action, the count of actions off and
// the largest differences with why.
ordered_json replay_json(const std::string& path, double tolerance_s, const ReplayComparison& c);

}  // namespace paci
