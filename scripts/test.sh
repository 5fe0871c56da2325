#!/usr/bin/env bash
# Everything CI does: install dependencies, build into build/, run the whole test suite, then the
# model and executor tests under older OpenBLAS kernels, the kernel and training tests under a
# simulated fallback, the interop stage (scripts/interop.sh), the sanitizers (scripts/sanitize.sh)
# and every fuzz target for 10 s (scripts/fuzz.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Line tables only (-g1): a quarter less compile time than full debug information.
bash scripts/build.sh -DPACI_WERROR=ON -DPACI_MPI=ON -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG"
cd build
ctest --output-on-failure -j "${PACI_JOBS:-2}" --timeout 600

# The model and executor tests again under each older OpenBLAS kernel this CPU can run, chosen as
# a user would (OPENBLAS_CORETYPE): results must not depend on the kernel (docs/blas.md). The
# run above already used the CPU's own (SkylakeX on AVX-512; Zen, not Haswell, on AMD). Their
# suite names come from the sources, with any parameterised prefix (Threads/Ops.Matmul/1).
suites=$(grep -ohE '^(TYPED_)?TEST(_F|_P)?\([A-Za-z0-9_]+' ../tests/model/*.cpp ../tests/exec/*.cpp |
  sed 's/.*(//' | sort -u | paste -sd'|')
model_exec="^([A-Za-z0-9_]+/)?($suites)\\."
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { for f in "$@"; do [[ "$flags" == *" $f "* ]] || return 1; done; }
kernels=(Prescott)
if has avx2 fma; then kernels+=(Haswell); fi
for kernel in "${kernels[@]}"; do
  echo "test: model and executor tests under OPENBLAS_CORETYPE=$kernel"
  OPENBLAS_CORETYPE=$kernel ctest --output-on-failure -j "${PACI_JOBS:-2}" --timeout 600 \
    -R "$model_exec"
done
# A machine where OpenBLAS "falls back" to Prescott: the test binary re-runs itself on the CPU's
# kernel, and so does every paci it starts (PACI_BLAS_TEST_FALLBACK: a testing aid, docs/blas.md).
# The kernel checks, the model tests and the training CLI tests, which start paci many times.
echo "test: kernel, model and training tests, simulated OpenBLAS fallback to Prescott"
OPENBLAS_CORETYPE=Prescott PACI_BLAS_TEST_FALLBACK=1 \
  ctest --output-on-failure -j "${PACI_JOBS:-2}" --timeout 600 -R "^(BlasKernel|CliBlas|CliTrain|CliGolden)\."
# What paci plan emits, judged by PyTorch's, torchtitan's and Megatron-LM's own code (pinned in
# tests/interop/requirements.txt, installed once into ~/.cache/paci-interop; docs/interop.md).
cd ..
bash scripts/interop.sh
cd build
# The sanitizers (docs/reliability.md): the whole suite under ASan + UBSan, the executor's and the
# launch's tests under TSan, each in a build tree of its own (build-asan/, build-tsan/).
cd ..
bash scripts/sanitize.sh
# Every libFuzzer target over its regression inputs, then 10 s from its seed corpus (hour-long
# runs are in docs/reliability.md).
bash scripts/fuzz.sh --seconds "${PACI_FUZZ_SECONDS:-10}"
