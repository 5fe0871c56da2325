// Entry point of the `paci` command: dispatches to subcommands and maps errors to exit codes
// (0 success, 2 bad usage or bad input, 1 failure while running).
#pragma once

namespace paci::cli {

int main(int argc, char** argv);

}  // namespace paci::cli
