// The checks every process of a launch makes before the processes meet, each an InputError with
// one line on process 0 while the others end quietly (QuietExit, exit 2): the launcher's
// variables, a launch paci cannot serve without MPI, MPI that does not see the launch, and one
// process per device.
#pragma once

#include <cstdint>
#include <string>

#include "exec/launch.hpp"

namespace paci::exec {

// Where this process sits in a launch (exec/launch.hpp); a malformed launcher variable is an
// InputError.
LaunchInfo launch_info();

// Under a launcher, in a paci built without MPI: the error naming the launch and what needs MPI.
// Process 0 throws it; the others end quietly with the same exit status (2).
[[noreturn]] void refuse_without_mpi(const LaunchInfo& launch, const std::string& needs);
// Under a launcher, with MPI: throws InputError unless MPI sees the launcher's processes (the
// launcher's variables without mpirun give every process a world of one).
void check_mpi_sees(const LaunchInfo& launch, int mpi_processes, const std::string& command);
// One process per device: an InputError unless the launch has `devices` processes.
void check_one_process_per_device(int processes, std::int32_t devices);

}  // namespace paci::exec
