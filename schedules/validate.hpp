// Validation: a schedule is valid when it is complete (every F has its B, or its I and W; the
// per-stage optimizer steps come every M backwards), its weight policy holds, and the devices can
// run their lists in order without deadlock (checked on a Boost.Graph dependency graph).
#pragma once

#include <cstdint>
#include <string>

#include "schedules/ir.hpp"

namespace paci {

struct ValidationSummary {
  std::int64_t actions = 0;
  std::int64_t dependency_edges = 0;  // data dependencies plus device-order edges
};

// Throws ScheduleError (index.hpp) naming the first problem and marking the actions involved; a
// deadlock's message starts with "deadlock" and marks every action on the cycle.
ValidationSummary validate(const Schedule& schedule);

// read_schedule + validate: an InputError whose first line names the file ("<stdin>" for "-")
// and the problem, followed for a deadlock or a missing action by the per-device grid with the
// offending actions marked.
Schedule load_valid_schedule(const std::string& path);

}  // namespace paci
