// A drift watch (exec/drift.hpp) for people and for files: a table of its windows, a summary of
// how far each stage's actions moved between windows and within them, and every sample as JSON.
#pragma once

#include <string>
#include <vector>

#include "exec/drift.hpp"
#include "traces/report.hpp"

namespace paci::fidelity {

// One line per window: stage 0's F, B, U medians [min, max] (ms) and the load factor; then, per
// stage and action, the drift between windows and the spread within them.
std::string drift_table(const exec::DriftWatch& watch,
                        const std::vector<exec::DriftWindow>& windows, std::size_t stages);

// {"seconds", "window_s", "windows": [...], "summary": [...], "alone": [...], "loaded": [...]}
ordered_json drift_json(const exec::DriftWatch& watch,
                        const std::vector<exec::DriftWindow>& windows, std::size_t stages,
                        double window_s);

}  // namespace paci::fidelity
