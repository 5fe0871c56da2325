// The machine a measurement came from, as every published timing carries it: cores, CPU model,
// and the BLAS with its running kernel (model/blas_kernel.hpp); the BLAS as reports and metrics
// carry it; and widening a launched process's core binding.
#pragma once

#include <string>

#include "exec/train_setup.hpp"
#include "model/blas_kernel.hpp"
#include "traces/report.hpp"

namespace paci::exec {

// {"cores": 2, "cpu": "Intel(R) Xeon(R) Processor", "blas": "OpenBLAS 0.3.21, kernel SkylakeX
// (OpenBLAS's choice; CPU: AVX-512)"}
ordered_json machine_json();

// "2 cores, Intel(R) Xeon(R) Processor, OpenBLAS 0.3.21, kernel SkylakeX (...)"
std::string machine_line();

// Lets this process run on every online core again (mpirun binds each process to a core or two):
// for the process of a launch that calibrates every stage's thread, as one process would on the
// whole node. Says so on stderr when the system refuses (`command` names who says it).
void unbind_from_cores(const std::string& command);

// {"library": "OpenBLAS 0.3.21", "kernel": "SkylakeX", "chosen_by": "openblas", "cpu": "AVX-512"},
// plus "requested" (user, paci) and "openblas_choice" (paci) when they apply.
ordered_json blas_json(const model::BlasIdentity& identity);

// The first line of paci train's metrics JSONL, newline included:
// {"run": {"paci": version, "kind", "stages", "microbatches", "first_step", "last_step"},
//  "blas": blas_json(this process)}. It has no "step": readers that look for steps skip it.
std::string metrics_head_line(const TrainSetup& t, const std::string& version);

}  // namespace paci::exec
