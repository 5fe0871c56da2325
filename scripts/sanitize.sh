#!/usr/bin/env bash
# The CPU code under the sanitizers (docs/reliability.md), each in a build tree of its own with
# CUDA and the benchmarks off:
#   build-asan/  AddressSanitizer + UndefinedBehaviorSanitizer (any finding fatal): the whole suite;
#   build-tsan/  ThreadSanitizer: the executor's and the MPI launch's tests (the threads).
# A finding fails the test that made it, with the sanitizer's report in its output. Suppressions
# live in scripts/sanitizers/, each with the reason it is not ours.
#   scripts/sanitize.sh [address|thread]...   (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${PACI_JOBS:-2}"
kinds=("$@")
if [ ${#kinds[@]} -eq 0 ]; then kinds=(address thread); fi
supp="$PWD/scripts/sanitizers"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for kind in "${kinds[@]}"; do
  case "$kind" in
    address) dir=build-asan ;;
    thread) dir=build-tsan ;;
    *) echo "sanitize.sh: unknown sanitizer '$kind' (address or thread)" >&2; exit 2 ;;
  esac
  echo "sanitize: building $dir (PACI_SANITIZE=$kind)"
  # TSan: no OpenMP (libgomp is not instrumented); the threads checked are paci's own.
  openmp=ON
  if [ "$kind" = thread ]; then openmp=OFF; fi
  # -g1: line tables for the reports. ASan at -O0 (its build 16% shorter, its run 20% longer: a
  # minute less in all), TSan at -O1 (its threads run long). The ASan tree also checks every
  # standard container index (_GLIBCXX_ASSERTIONS): ASan does not see an index out of range that
  # only forms a pointer and never reads it.
  opt=-O1
  if [ "$kind" = address ]; then opt="-O0 -D_GLIBCXX_ASSERTIONS"; fi
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$opt -g1 -DNDEBUG" -DPACI_SANITIZE="$kind" \
    -DPACI_OPENMP="$openmp" -DPACI_CUDA=OFF -DPACI_BUILD_BENCH=OFF -DPACI_MPI=ON \
    -DPACI_WERROR=ON >/dev/null
  start=$SECONDS
  cmake --build "$dir" -j "$jobs" --target paci paci_tests
  echo "sanitize: $dir built in $((SECONDS - start)) s"
  start=$SECONDS
  cd "$dir"
  if [ "$kind" = address ]; then
    # The kill-and-resume test trains a few times per schedule; under ASan each run takes seconds.
    # The 1F1B, interleaved and PACI cases run here (one device per stage, several per device, a
    # cut with micro-batches in flight); every case runs in the main suite, and every schedule's
    # cuts run here in tests/exec/test_cut.cpp. Stacks are unwound the fast way: the one test
    # whose paci starts MPI in a leak-checked process asks for whole stacks itself (the Open MPI
    # leak suppressions need them).
    asan_skip='KillAndResume\.[A-Za-z]+/(gpipe|zb_h1|zb_h2|pipedream|2bw)( |$)'

    echo "sanitize: whole suite under ASan + UBSan"
    ASAN_OPTIONS="detect_leaks=1:strict_string_checks=1" \
      LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0" \
      UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
      ctest --output-on-failure -j "$jobs" --timeout 1200 -LE gpu -E "$asan_skip"
  else
    echo "sanitize: executor and launch tests under TSan"
    suites=$(grep -ohE '^(TYPED_)?TEST(_F|_P)?\([A-Za-z0-9_]+' ../tests/exec/*.cpp \
      ../tests/cli/test_cli_mpi.cpp | sed 's/.*(//' | sort -u | paste -sd'|')
    TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$supp/tsan.supp" \
      ctest --output-on-failure -j "$jobs" --timeout 1200 -R "^([A-Za-z0-9_]+/)?($suites)\\."
  fi
  echo "sanitize: $kind tests passed in $((SECONDS - start)) s"
  cd ..
done
