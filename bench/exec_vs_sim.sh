#!/usr/bin/env bash
# Benchmark: paci and 1f1b measured by the executor next to the simulator's prediction from a cost
# model calibrated in the same run (paci fidelity: REPEATS runs each, round-robin, a calibration
# round before each round of runs), at P=2 and P=4 (M=4, N=8). Prints the measured median with its
# range, the prediction's error against the median, and PACI's speed-up over 1F1B predicted and
# measured. A benchmark reports, it does not assert: exits 0 whatever the numbers.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh --target paci >/dev/null
bash scripts/prepare_data.sh >/dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for P in ${STAGES:-2 4}; do
  build/cli/paci fidelity --kinds 1f1b,paci --stages "$P" --microbatches 4 --steps "${STEPS:-8}" \
    --repeats "${REPEATS:-5}" --json "$out/fidelity_P$P.json" >/dev/null
done
python3 - "$out" ${STAGES:-2 4} <<'PY'
import json, sys
out, stages = sys.argv[1], sys.argv[2:]
for P in stages:
    j = json.load(open(f"{out}/fidelity_P{P}.json"))
    runs = {r["kind"]: r for r in j["runs"]}
    tok = 16 * 128 * 4 * runs["paci"]["steps"]
    print(f"P={P} on {j['machine']['cores']} cores, {j['machine']['cpu']}, {j['machine']['blas']}")
    print(f"{'schedule':<8} {'predicted s':>12} {'measured median [min, max] s':>30} {'error':>8} "
          f"{'tokens/s (median)':>18}")
    for k in ("1f1b", "paci"):
        r = runs[k]
        rng = f"{r['measured_makespan_s']:.3f} [{r['measured_min_s']:.3f}, {r['measured_max_s']:.3f}]"
        print(f"{k:<8} {r['predicted_makespan_s']:>12.3f} {rng:>30} {100*r['relative_error']:>+7.1f}% "
              f"{tok / r['measured_makespan_s']:>18.0f}")
    p = runs["1f1b"]["predicted_makespan_s"] / runs["paci"]["predicted_makespan_s"]
    m = runs["1f1b"]["measured_makespan_s"] / runs["paci"]["measured_makespan_s"]
    print(f"paci speed-up over 1f1b: predicted {p:.3f}x, measured {m:.3f}x (medians)\n")
PY
