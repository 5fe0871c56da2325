// The main of every bench_* program: makes sure OpenBLAS runs a kernel that fits the CPU (this
// may re-execute the program once), records that kernel in the output's context as "blas", then
// runs the registered benchmarks as BENCHMARK_MAIN would.
#pragma once

#include <benchmark/benchmark.h>

#include "model/blas_kernel.hpp"

namespace paci::bench {

inline int run_benchmarks(int argc, char** argv) {
  model::ensure_blas_kernel(argv);
  benchmark::AddCustomContext("blas", model::describe(model::blas_identity()));
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace paci::bench
