#!/usr/bin/env bash
# Benchmark: the training speed a user actually gets under each OpenBLAS kernel setting.
# One measurement (paci train, 1 stage, 1 thread, the default GPT on KJV) repeated round-robin
# over: (a) the environment as is, (b) a simulated fallback to Prescott, which paci corrects,
# (c) Prescott forced by the user (the speed without the fix), (d) Haswell forced by the user.
# Prints min / median / max tokens/s, the kernel each ran, the machine, and the ratios b/a and a/c.
# A benchmark reports, it does not assert: exits 0 whatever the numbers.
#
#   bench/blas_kernel.sh           REPEATS=3 STEPS=12 BUILD_DIR=build by default
#   RESULTS=docs/results bench/blas_kernel.sh   also writes blas_kernel_headline.md there
set -euo pipefail
cd "$(dirname "$0")/.."
build="${BUILD_DIR:-build}"
if [ "$build" = build ]; then
  bash scripts/build.sh --target paci >/dev/null
else
  cmake --build "$build" --target paci -j "${PACI_JOBS:-2}" >/dev/null
fi
PACI_BINARY="$build/cli/paci" bash scripts/prepare_data.sh >/dev/null
paci="$build/cli/paci"
repeats="${REPEATS:-3}" steps="${STEPS:-12}"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# Name and environment of each configuration (env arguments; paci's own markers always cleared).
names=(as_is simulated_fallback user_prescott user_haswell)
envs=(""
  "OPENBLAS_CORETYPE=Prescott PACI_BLAS_TEST_FALLBACK=1"
  "-u PACI_BLAS_TEST_FALLBACK OPENBLAS_CORETYPE=Prescott"
  "-u PACI_BLAS_TEST_FALLBACK OPENBLAS_CORETYPE=Haswell")
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
if [[ "$flags" != *" avx2 "* || "$flags" != *" fma "* ]]; then
  names=("${names[@]:0:3}") envs=("${envs[@]:0:3}")  # Haswell's kernels need AVX2 and FMA
fi

command="$paci train --stages 1 --threads 1 --steps $steps --quiet --report R.json"
for r in $(seq 1 "$repeats"); do
  for i in "${!names[@]}"; do
    # shellcheck disable=SC2086  # the environment is a list of env arguments
    env -u PACI_BLAS_KERNEL_CHOSEN -u PACI_BLAS_KERNEL_REPLACED ${envs[$i]} \
      "$paci" train --stages 1 --threads 1 --steps "$steps" --quiet \
      --report "$out/${names[$i]}.$r.json"
  done
  echo "blas_kernel: round $r of $repeats done" >&2
done

python3 - "$out" "$repeats" "$command" "${names[@]}" <<'PY'
import json, os, statistics, sys
out, repeats, command, names = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
labels = {"as_is": "(a) environment as is",
          "simulated_fallback": "(b) simulated fallback to Prescott (paci corrects it)",
          "user_prescott": "(c) OPENBLAS_CORETYPE=Prescott (the speed without the fix)",
          "user_haswell": "(d) OPENBLAS_CORETYPE=Haswell"}
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")),
           "unknown CPU")
print(f"machine: {cpu}, {os.cpu_count()} cores")
print(f"command: {command} (x{repeats} each, round-robin)")
print(f"{'configuration':<58} {'kernel (chosen by)':<22} {'min':>7} {'median':>7} {'max':>7}  tokens/s")
median, rates_of = {}, {}
for name in names:
    reports = [json.load(open(os.path.join(out, f"{name}.{r}.json"))) for r in range(1, repeats + 1)]
    rates = sorted(rep["throughput"]["tokens_per_s"] for rep in reports)
    blas = {f"{rep['blas']['kernel']} ({rep['blas']['chosen_by']})" for rep in reports}
    median[name] = statistics.median(rates)
    rates_of[name] = rates
    print(f"{labels[name]:<58} {', '.join(sorted(blas)):<22} {rates[0]:>7.0f} {median[name]:>7.0f} "
          f"{rates[-1]:>7.0f}")
print(f"library: {reports[0]['blas']['library']}; CPU class: {reports[0]['blas']['cpu']}")
print(f"(b)/(a) median: {median['simulated_fallback'] / median['as_is']:.3f}  "
      f"(a)/(c) median: {median['as_is'] / median['user_prescott']:.3f}")
if os.environ.get("RESULTS"):  # one line for the README's performance table
    spread = lambda n: (f"{median[n]:,.0f} [{min(r for r in rates_of[n]):,.0f}, "
                        f"{max(r for r in rates_of[n]):,.0f}]")
    line = (f"tokens/s, median [min, max] of {repeats}: as is {spread('as_is')}; simulated "
            f"fallback, corrected {spread('simulated_fallback')}; Prescott forced "
            f"{spread('user_prescott')} ({median['as_is'] / median['user_prescott']:.2f}x slower)")
    open(os.path.join(os.environ["RESULTS"], "blas_kernel_headline.md"), "w").write(line + "\n")
PY
