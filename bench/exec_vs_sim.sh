#!/usr/bin/env bash
# Benchmark (issue 5): with P=2 on this machine (M=4, N=8), measured makespan and throughput of
# paci and 1f1b next to the simulator's prediction from a cost model paci calibrate measured in
# the same run. Targets: prediction within 10% of measurement for both, and paci ahead of 1f1b by
# the predicted margin. Prints a table; exits 0 (a benchmark reports, it does not assert).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh --target paci >/dev/null
bash scripts/prepare_data.sh >/dev/null
out=$(mktemp -d)
build/cli/paci fidelity --kinds 1f1b,paci --stages 2 --microbatches 4 --steps "${STEPS:-8}" \
  --repeats "${REPEATS:-3}" --json "$out/fidelity.json" >/dev/null
python3 - "$out/fidelity.json" <<'PY'
import json, sys
runs = {r["kind"]: r for r in json.load(open(sys.argv[1]))["runs"]}
tok = 16 * 128 * 4 * runs["paci"]["steps"]
print(f"{'schedule':<8} {'predicted s':>12} {'measured s':>11} {'error':>8} {'measured tok/s':>15}")
for k in ("1f1b", "paci"):
    r = runs[k]
    print(f"{k:<8} {r['predicted_makespan_s']:>12.3f} {r['measured_makespan_s']:>11.3f} "
          f"{100*r['relative_error']:>+7.1f}% {tok / r['measured_makespan_s']:>15.0f}")
p = runs["1f1b"]["predicted_makespan_s"] / runs["paci"]["predicted_makespan_s"]
m = runs["1f1b"]["measured_makespan_s"] / runs["paci"]["measured_makespan_s"]
print(f"paci speed-up over 1f1b: predicted {p:.3f}x, measured {m:.3f}x")
PY
rm -rf "$out"
