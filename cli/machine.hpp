// The machine a measurement came from, as every published timing carries it: cores, CPU model,
// and the BLAS with its running kernel (model/blas_kernel.hpp).
#pragma once

#include <string>

#include "traces/report.hpp"

namespace paci::cli {

// {"cores": 2, "cpu": "Intel(R) Xeon(R) Processor", "blas": "OpenBLAS 0.3.21, kernel SkylakeX
// (OpenBLAS's choice; CPU: AVX-512)"}
ordered_json machine_json();

// "2 cores, Intel(R) Xeon(R) Processor, OpenBLAS 0.3.21, kernel SkylakeX (...)"
std::string machine_line();

// Lets this process run on every online core again (mpirun binds each process to a core or two):
// for the process of a launch that calibrates every stage's thread, as one process would on the
// whole node. Says so on stderr when the system refuses (`command` names who says it).
void unbind_from_cores(const std::string& command);

}  // namespace paci::cli
