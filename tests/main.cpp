// The test binary's main: OpenBLAS on a kernel that fits the CPU first (model/blas_kernel.hpp; the
// binary may re-execute itself once, which is what a simulated fallback run exercises), then gtest.
#include <gtest/gtest.h>

#include "model/blas_kernel.hpp"

int main(int argc, char** argv) {
  paci::model::ensure_blas_kernel(argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
