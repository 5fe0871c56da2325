// Reading a schedule file and validating it, with invalid schedules reported as one line naming
// the problem followed by the per-device grid with the offending actions marked.
#pragma once

#include <string>

#include "schedules/ir.hpp"

namespace paci::cli {

// read_schedule + validate; throws InputError whose first line names the file and the problem.
Schedule load_valid_schedule(const std::string& path);

// Output path "-" means standard output.
void write_output(const std::string& path, const std::string& content);

}  // namespace paci::cli
