#!/usr/bin/env bash
# Benchmark: two builds of paci side by side, for a change that must not slow anything down.
# Runs bench_sim, bench_schedules and bench_gpt of BEFORE and AFTER (build folders holding
# bench/) round-robin, REPEATS rounds, the order swapped every round, and the executor's own
# makespan on a few schedules (paci train -p 2 -m 8 -n 4, one thread a device) the same way.
# Prints, per benchmark, the median [min, max] of each side and the ratio of the medians, with the
# machine. A benchmark reports, it does not assert: exits 0 whatever the numbers.
#
#   bench/compare.sh BEFORE AFTER          e.g. a build of the parent commit and build/
#   REPEATS=5 KINDS="1f1b paci zb-h1" bench/compare.sh ...
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -ne 2 ]; then
  echo "usage: bench/compare.sh BEFORE_BUILD_DIR AFTER_BUILD_DIR" >&2
  exit 2
fi
before=$1 after=$2
for dir in "$before" "$after"; do
  for program in bench/bench_sim bench/bench_schedules bench/bench_gpt cli/paci; do
    if [ ! -x "$dir/$program" ]; then
      echo "compare: $dir/$program is missing (cmake --build $dir --target bench_sim" \
        "bench_schedules bench_gpt paci)" >&2
      exit 2
    fi
  done
done
repeats="${REPEATS:-5}" kinds="${KINDS:-1f1b paci zb-h1}"
paci_args=(-p 2 -m 8 -n 4 --threads 1 --quiet)
PACI_BINARY="$after/cli/paci" bash scripts/prepare_data.sh >/dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

for r in $(seq 1 "$repeats"); do
  sides=(before after)
  if [ $((r % 2)) -eq 0 ]; then sides=(after before); fi
  for side in "${sides[@]}"; do
    dir=$before
    [ "$side" = after ] && dir=$after
    for b in bench_sim bench_schedules bench_gpt; do
      "$dir/bench/$b" --benchmark_format=json --benchmark_out="$out/$b.$side.$r.json" \
        --benchmark_out_format=json >/dev/null 2>&1
    done
    for kind in $kinds; do
      "$dir/cli/paci" train --kind "$kind" "${paci_args[@]}" --report "$out/train_$kind.$side.$r.json"
    done
  done
  echo "compare: round $r of $repeats done" >&2
done

python3 - "$out" "$repeats" "$kinds" "${paci_args[*]}" <<'PY'
import json, os, platform, statistics, sys
out, repeats, kinds, paci_args = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4]
def spread(xs):
    return statistics.median(xs), min(xs), max(xs)
rows = {}  # name -> side -> [seconds]
context = None
for b in ("bench_sim", "bench_schedules", "bench_gpt"):
    for side in ("before", "after"):
        for r in range(1, repeats + 1):
            with open(os.path.join(out, f"{b}.{side}.{r}.json")) as f:
                j = json.load(f)
            context = context or j["context"]
            for bm in j["benchmarks"]:
                unit = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[bm["time_unit"]]
                rows.setdefault(f"{b} {bm['name']}", {}).setdefault(side, []).append(
                    bm["real_time"] * unit)
for kind in kinds:
    for side in ("before", "after"):
        for r in range(1, repeats + 1):
            with open(os.path.join(out, f"train_{kind}.{side}.{r}.json")) as f:
                j = json.load(f)
            rows.setdefault(f"paci train --kind {kind} {paci_args} (makespan)", {}).setdefault(
                side, []).append(j["makespan_s"])
cpu = "unknown CPU"
with open("/proc/cpuinfo") as f:
    for line in f:
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
print(f"# before / after, {repeats} interleaved rounds; {os.cpu_count()} cores, {cpu};"
      f" {context.get('blas', 'BLAS kernel not recorded')}")
print()
print("| benchmark | before: median [min, max] | after: median [min, max] | after / before |")
print("|---|---|---|---|")
def fmt(s):
    return f"{s * 1e3:.1f} ms" if s < 10 else f"{s:.2f} s"
for name, sides in rows.items():
    b, a = spread(sides["before"]), spread(sides["after"])
    overlap = "" if a[1] <= b[2] and b[1] <= a[2] else " (ranges apart)"
    print(f"| {name} | {fmt(b[0])} [{fmt(b[1])}, {fmt(b[2])}] | {fmt(a[0])} [{fmt(a[1])},"
          f" {fmt(a[2])}] | {a[0] / b[0]:.3f}{overlap} |")
PY
