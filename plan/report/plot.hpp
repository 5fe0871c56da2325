// The frontier's plot (what leaves paci for the tools that run a plan is interop/'s).
#pragma once

#include <string>

#include <string>

namespace paci::plan {

// Step time against peak memory, staleness as colour, from frontier_csv()'s file, with python3's
// matplotlib (scripts' python3, else /usr/bin/python3). Returns "" when written, else why not.
std::string plot_frontier(const std::string& csv_path, const std::string& svg_path);

}  // namespace paci::plan
