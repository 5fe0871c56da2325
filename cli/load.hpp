// Where a command's output goes: a file written atomically, or standard output for "-".
#pragma once

#include <string>

namespace paci::cli {

// Output path "-" means standard output.
void write_output(const std::string& path, const std::string& content);

}  // namespace paci::cli
