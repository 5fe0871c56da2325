#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/, docs/reliability.md) with clang in build-fuzz/ and
# runs each, PACI_JOBS at once (default 2): first over its regression inputs (inputs that once
# failed, tests/fuzz/regressions/TARGET/), then from its seed corpus (tests/fuzz/corpus/) for
# SECONDS. New inputs go to out/fuzz/corpus/TARGET/ (kept between runs), a failing input to
# out/fuzz/TARGET-crash-… with the report in out/fuzz/TARGET.log. Exits non-zero when any target
# finds something.
#   scripts/fuzz.sh [--seconds S] [TARGET...]     (default: 30 s, every target)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=30
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    -h | --help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if ! [[ "$seconds" =~ ^[1-9][0-9]*$ ]]; then
  echo "fuzz.sh: --seconds must be a positive whole number, got '$seconds'" >&2
  exit 2
fi
if ! command -v clang++ >/dev/null; then
  echo "fuzz.sh: clang++ not found (bash scripts/setup.sh installs clang and libFuzzer)" >&2
  exit 2
fi
all=(schedule_json schedule_csv schedule_text cost_model report shard llmc state launch)
if [ ${#targets[@]} -eq 0 ]; then targets=("${all[@]}"); fi
for t in "${targets[@]}"; do
  if [[ " ${all[*]} " != *" $t "* ]]; then
    echo "fuzz.sh: unknown target '$t' (one of: ${all[*]})" >&2
    exit 2
  fi
done

echo "fuzz: building build-fuzz/ (clang, libFuzzer, ASan + UBSan)"
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DPACI_FUZZ=ON -DPACI_OPENMP=OFF \
  -DPACI_CUDA=OFF -DPACI_BUILD_BENCH=OFF -DPACI_BUILD_TESTS=OFF -DPACI_MPI=OFF \
  -DPACI_WERROR=ON >/dev/null
start=$SECONDS
cmake --build build-fuzz -j "${PACI_JOBS:-2}" --target paci_fuzz
echo "fuzz: built in $((SECONDS - start)) s"

out=out/fuzz
mkdir -p "$out"
export ASAN_OPTIONS="detect_leaks=1:strict_string_checks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# One target: its regression inputs, then fuzzing. Prints its line into out/fuzz/TARGET.result;
# returns non-zero on a finding.
fuzz_one() {
  local t="$1" binary="build-fuzz/tests/fuzz/fuzz_$1" regressions="tests/fuzz/regressions/$1"
  if compgen -G "$regressions/*" >/dev/null; then
    if ! "$binary" "$regressions"/* >"$out/$t.regressions.log" 2>&1; then
      echo "fuzz: $t: a regression input fails again (out/fuzz/$t.regressions.log)" >"$out/$t.result"
      return 1
    fi
  fi
  mkdir -p "$out/corpus/$t"
  local dict=()  # the format's tokens and keys (tests/fuzz/dicts/)
  case "$t" in
    schedule_json | cost_model | report | state) dict=(-dict=tests/fuzz/dicts/json.dict) ;;
    schedule_csv | schedule_text) dict=(-dict=tests/fuzz/dicts/rows.dict) ;;
    launch) dict=(-dict=tests/fuzz/dicts/launch.dict) ;;
  esac
  # -timeout: one input taking 10 s is a hang; -rss_limit_mb: an input that makes a reader
  # allocate 2 GiB is a finding (the readers check sizes against the file before allocating).
  if "$binary" "$out/corpus/$t" "tests/fuzz/corpus/$t" "${dict[@]}" -max_total_time="$seconds" \
    -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$out/$t-" \
    >"$out/$t.log" 2>&1; then
    local runs cov
    runs=$(grep -m1 'stat::number_of_executed_units' "$out/$t.log" | awk '{print $2}' || true)
    cov=$(grep -E '^#[0-9]+.*cov:' "$out/$t.log" | tail -1 | grep -oE 'cov: [0-9]+' || true)
    echo "fuzz: $t: ${runs:-?} inputs in $seconds s, nothing found (${cov:-cov: ?} edges)" \
      >"$out/$t.result"
  else
    {
      echo "fuzz: $t: FOUND a failure; input and report: out/fuzz/$t-*, out/fuzz/$t.log"
      grep -m3 -E 'finding:|ERROR: |SUMMARY: |==ERROR' "$out/$t.log" | sed 's/^/  /' || true
    } >"$out/$t.result"
    return 1
  fi
}

# As many targets at once as there are jobs (each fuzzes on one core).
jobs="${PACI_JOBS:-2}"
running=0
for t in "${targets[@]}"; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  rm -f "$out/$t.result"
  fuzz_one "$t" &
  running=$((running + 1))
done
wait || true
failed=()
for t in "${targets[@]}"; do
  if [ -f "$out/$t.result" ]; then cat "$out/$t.result"; else echo "fuzz: $t: did not finish"; fi
  if ! grep -q "nothing found" "$out/$t.result" 2>/dev/null; then failed+=("$t"); fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: failures in: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: all ${#targets[@]} targets ran $seconds s each ($jobs at once), nothing found"
