#!/usr/bin/env bash
# The one GPU check (docs/cuda.md): on a machine with an NVIDIA GPU and the CUDA toolkit, builds
# the CUDA backend, checks every kernel, whole stages and the pipeline executor against the CPU
# backend, trains paci and 1f1b with P=4 stages on the GPU (`paci train --device cuda`) and checks
# their versions against `paci analyze` and their losses against the CPU's, benchmarks a
# GPT-2-small stage, and writes logs plus summary.json under $OUT (default out/gpu). Exit 0 only if
# every GPU test passed (none may skip) and the benchmark ran. Target: under 8 minutes on one H200.
#
# Dependencies: scripts/setup.sh (apt). A machine without a package registry can instead be handed
# the .deb files that scripts/gpu_deps.sh downloads (default out/gpu-deps, or $PACI_DEPS_DIR);
# they are unpacked under /tmp/paci-deps, never over /.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
OUT=${OUT:-$root/out/gpu}
mkdir -p "$OUT"
log=$OUT/gpu_check.log
: >"$log"
start=$(date +%s)
phase=start
build_s=0 tests_s=0 bench_s=0 pipeline_s=0
pipeline="not run"
passed=0 failed=0 skipped=0

say() { echo "gpu_check: $*" | tee -a "$log"; }
summary() {  # summary.json from what ran; $1 = pass | fail
  local bench=null
  [ -s "$OUT/bench.json" ] && bench=$(cat "$OUT/bench.json")
  cat >"$OUT/summary.json" <<EOF
{"status": "$1", "phase": "$phase", "gpu": "${gpu_name:-unknown}", "driver": "${gpu_driver:-unknown}",
 "cuda_architectures": "${arch:-unknown}", "nvcc": "${nvcc_version:-unknown}",
 "build_s": $build_s, "tests_s": $tests_s, "bench_s": $bench_s, "total_s": $(($(date +%s) - start)),
 "tests": {"passed": $passed, "failed": $failed, "skipped": $skipped}, "nccl_tests": "${nccl:-not run}",
 "pipeline_s": $pipeline_s, "pipeline": $(printf '%s' "$pipeline" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))' 2>/dev/null || echo '"?"'),
 "bench": $bench}
EOF
}
fail() {
  say "FAILED in phase '$phase': $*"
  summary fail
  exit 1
}

# ---- 1. the GPU -----------------------------------------------------------------------------------
phase=nvidia-smi
nvidia-smi 2>&1 | tee -a "$log" || fail "nvidia-smi did not run: no NVIDIA driver here"
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
gpu_driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '. ')
[ -n "$arch" ] || arch=90

# ---- 2. dependencies ------------------------------------------------------------------------------
phase=setup
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
command -v nvcc >/dev/null || fail "no nvcc on PATH or in /usr/local/cuda/bin"
nvcc_version=$(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')
# The CUDA runtime the toolkit links needs a driver that supports at least its version; an older
# one makes every GPU test report "no CUDA device". Say so in one line instead.
driver_cuda=$(nvidia-smi | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -1)
if [ -n "$driver_cuda" ] && [ -n "$nvcc_version" ] &&
  [ "$(printf '%s\n%s\n' "$nvcc_version" "$driver_cuda" | sort -V | head -1)" != "$nvcc_version" ]; then
  fail "the driver ($gpu_driver) supports CUDA $driver_cuda, older than the toolkit's CUDA $nvcc_version: update the driver or use a toolkit <= $driver_cuda"
fi
# Every kernel loaded when a context starts (lazy loading mid-run can wait behind NCCL).
export CUDA_MODULE_LOADING=EAGER
cmake_extra=()
if ! timeout 180 bash scripts/setup.sh >>"$log" 2>&1; then
  deps=${PACI_DEPS_DIR:-$root/out/gpu-deps}
  ls "$deps"/*.deb >/dev/null 2>&1 ||
    fail "scripts/setup.sh could not install the build dependencies (no registry?) and $deps holds no .deb files: run scripts/gpu_deps.sh on a machine with apt and bring that folder along"
  say "setup.sh failed; unpacking $(ls "$deps"/*.deb | wc -l) carried packages from $deps"
  prefix=/tmp/paci-deps
  for deb in "$deps"/*.deb; do dpkg-deb -x "$deb" "$prefix" || fail "cannot unpack $deb"; done
  multiarch=$prefix/usr/lib/x86_64-linux-gnu
  export CMAKE_PREFIX_PATH=$prefix/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
  export PKG_CONFIG_PATH=$multiarch/pkgconfig:$prefix/usr/share/pkgconfig
  export PKG_CONFIG_SYSROOT_DIR=$prefix
  export LD_LIBRARY_PATH=$multiarch:$multiarch/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  if ! command -v pkg-config >/dev/null && [ -x "$prefix/usr/bin/pkgconf" ]; then
    cmake_extra+=("-DPKG_CONFIG_EXECUTABLE=$prefix/usr/bin/pkgconf")
  fi
fi

# ---- 3. build ---------------------------------------------------------------------------------------
phase=build
t0=$(date +%s)
say "configuring build-gpu (PACI_CUDA=ON, CMAKE_CUDA_ARCHITECTURES=$arch, nvcc $nvcc_version)"
timeout 120 cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DPACI_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES="$arch" "${cmake_extra[@]}" >>"$log" 2>&1 ||
  fail "cmake configure failed (see $log)"
timeout 360 cmake --build build-gpu -j "$(nproc)" --target paci_cuda_tests paci_exec_cuda_tests bench_cuda paci >>"$log" 2>&1 ||
  fail "build failed (see $log)"
build_s=$(($(date +%s) - t0))
say "built in ${build_s}s"

# ---- 4. GPU tests: every kernel, whole stages and the pipeline executor against the CPU backend ------
phase=tests
t0=$(date +%s)
tests_rc=0
: >"$OUT/tests.log"
for bin in build-gpu/cuda/tests/paci_cuda_tests build-gpu/exec/cuda/paci_exec_cuda_tests; do
  name=$(basename "$bin")
  PACI_REQUIRE_GPU=1 timeout 300 "$bin" --gtest_output="json:$OUT/$name.json" >"$OUT/$name.log" 2>&1 ||
    tests_rc=1
  cat "$OUT/$name.log" >>"$OUT/tests.log"
done
tests_s=$(($(date +%s) - t0))
count() { sed -n "s/^\[  $1 \] \([0-9]*\) test.*/\1/p" "$OUT/tests.log" | awk '{s+=$1} END {print s+0}'; }
passed=$(count 'PASSED ') failed=$(count 'FAILED ') skipped=$(count SKIPPED)
grep -E '^\[  (FAILED  |SKIPPED )\]' "$OUT/tests.log" | tee -a "$log"
say "tests: $passed passed, $failed failed, $skipped skipped in ${tests_s}s (rc $tests_rc)"
[ "$tests_rc" -eq 0 ] && [ "$failed" -eq 0 ] && [ "$skipped" -eq 0 ] && [ "$passed" -gt 0 ] ||
  fail "GPU tests failed (see $OUT/tests.log)"

# ---- 4b. paci train --device cuda: P=4 on one GPU against paci analyze and the CPU backend --------
phase=pipeline
t0=$(date +%s)
paci=build-gpu/cli/paci
train_data=data/kjv_train.bin val_data=data/kjv_val.bin
if [ ! -s "$train_data" ]; then  # no corpus carried along: the repository's own text will do
  cat README.md docs/*.md >"$OUT/corpus.txt"
  "$paci" data tokenize "$OUT/corpus.txt" --train "$OUT/corpus_train.bin" --val "$OUT/corpus_val.bin" \
    >>"$log" 2>&1 || fail "cannot tokenize a corpus"
  train_data=$OUT/corpus_train.bin val_data=$OUT/corpus_val.bin
fi
pipeline=""
for kind in paci 1f1b; do
  common=(--kind "$kind" --stages 4 --microbatches 4 --steps 20 --lr 1e-3 --data "$train_data"
    --val-data "$val_data" --quiet)
  "$paci" schedule --kind "$kind" --stages 4 --microbatches 4 --steps 20 -o "$OUT/$kind.schedule.json" &&
    "$paci" analyze "$OUT/$kind.schedule.json" --json "$OUT/$kind.analysis.json" >>"$log" 2>&1 ||
    fail "paci analyze failed"
  timeout 120 "$paci" train "${common[@]}" --report "$OUT/${kind}_cpu.json" >>"$log" 2>&1 ||
    fail "CPU run of $kind failed (see $log)"
  for precision in fp32 bf16; do
    rtol=1e-3
    [ "$precision" = bf16 ] && rtol=5e-2
    timeout 120 "$paci" train "${common[@]}" --device cuda --precision "$precision" \
      --report "$OUT/${kind}_gpu_$precision.json" --trace "$OUT/${kind}_gpu_$precision.trace.json" \
      >>"$log" 2>&1 || fail "GPU run of $kind ($precision) failed (see $log)"
    line=$(python3 scripts/gpu_pipeline_check.py "$OUT/${kind}_gpu_$precision.json" \
      "$OUT/$kind.analysis.json" "$OUT/${kind}_cpu.json" --rtol "$rtol")
    rc=$?
    say "pipeline $precision: $line"
    pipeline="$pipeline$precision $line; "
    [ "$rc" -eq 0 ] || fail "GPU pipeline check failed: $line"
  done
done
pipeline_s=$(($(date +%s) - t0))

# ---- 5. benchmark: GPT-2-small stage, bf16 and fp32, MFU against cuBLAS -----------------------------
phase=bench
t0=$(date +%s)
timeout 300 build-gpu/cuda/bench/bench_cuda --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log" |
  tee -a "$log"
bench_rc=${PIPESTATUS[0]}
bench_s=$(($(date +%s) - t0))
[ "$bench_rc" -eq 0 ] || fail "benchmark failed (rc $bench_rc, see $OUT/bench.log)"

# ---- 6. NCCL transport, where NCCL was found: the two-rank exchange with 2+ GPUs ---------------
phase=nccl
nccl=skipped filter=none
targets=$(cmake --build build-gpu --target help 2>/dev/null)
if grep -q paci_nccl_tests <<<"$targets"; then
  filter='*'
  [ "$(nvidia-smi -L | wc -l)" -ge 2 ] || filter='-*TwoGpus*'
  if timeout 300 cmake --build build-gpu -j "$(nproc)" --target paci_nccl_tests >>"$log" 2>&1 &&
    timeout 120 build-gpu/cuda/nccl/paci_nccl_tests --gtest_filter="$filter" >>"$log" 2>&1; then
    nccl=passed
  else
    fail "NCCL transport tests failed (see $log)"
  fi
fi
say "NCCL transport tests: $nccl (filter $filter)"

phase=done
summary pass
say "PASS in $(($(date +%s) - start))s; summary in $OUT/summary.json"
