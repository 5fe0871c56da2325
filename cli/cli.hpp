// Entry point of the `paci` command: dispatches to subcommands and maps errors to exit codes
// (0 success, 2 bad usage or bad input, 1 failure while running).
#pragma once

#include <exception>
#include <string>

namespace paci::cli {

int main(int argc, char** argv);

// Prints `error` as paci `command`'s one line on stderr (unless `print` is false, or for
// exec::QuietExit) and returns the exit code it maps to.
int report_failure(const std::string& command, std::exception_ptr error, bool print = true);

}  // namespace paci::cli
