// The BLAS a run used, in the form reports and metrics carry it: the library, the running kernel,
// who chose it (openblas, user or paci) and the CPU's vector class (model/blas_kernel.hpp).
#pragma once

#include <string>

#include "cli/train_setup.hpp"
#include "model/blas_kernel.hpp"
#include "traces/report.hpp"

namespace paci::cli {

// {"library": "OpenBLAS 0.3.21", "kernel": "SkylakeX", "chosen_by": "openblas", "cpu": "AVX-512"},
// plus "requested" (user, paci) and "openblas_choice" (paci) when they apply.
ordered_json blas_json(const model::BlasIdentity& identity);

// The first line of paci train's metrics JSONL, newline included:
// {"run": {"paci": version, "kind", "stages", "microbatches", "first_step", "last_step"},
//  "blas": blas_json(this process)}. It has no "step": readers that look for steps skip it.
std::string metrics_head_line(const TrainSetup& t);

}  // namespace paci::cli
