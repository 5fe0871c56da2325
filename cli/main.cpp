// The `paci` executable. First of all it makes sure OpenBLAS runs a kernel that fits the CPU
// (model/blas_kernel.hpp: this may re-execute the process once).
#include "cli/cli.hpp"
#include "model/blas_kernel.hpp"

int main(int argc, char** argv) {
  paci::model::ensure_blas_kernel(argv);
  return paci::cli::main(argc, argv);
}
