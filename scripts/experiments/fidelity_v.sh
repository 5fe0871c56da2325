#!/usr/bin/env bash
# The V-shaped schedules measured on this CPU: zb-v, dualpipev and dualpipe beside 1f1b and paci
# at P=2 (4 model stages of the default 4-layer GPT; the V's 2P stages calibrated apart, as paci
# fidelity does for every placement), M=4, N=8, each schedule run REPEATS times round-robin with
# a calibration round before each round of runs, predicted against the measured median and range.
# DualPipeV's overlapped pairs run back to back on a CPU (nothing to overlap): its measured rows
# check the pair's order and the V's placement, not the overlap. DualPipe (two copies of the
# model, 2 stages of 2 layers each, each device a stage of each copy) the same, and the twins'
# gradient exchange before every update.
# Writes docs/results/fidelity_v.md (paci fidelity's table) and fidelity_v_headline.md (for the
# README); REPEATS=5 by default, a few minutes on 2 cores. Run it on an otherwise idle machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
repeats="${REPEATS:-5}"
bash scripts/setup.sh >/dev/null
bash scripts/build.sh --target paci >/dev/null
bash scripts/prepare_data.sh >/dev/null
out=out/fidelity_v
mkdir -p "$out" docs/results
# SUMMARY_ONLY=1: rewrite the headline from docs/results/fidelity_v.md, no runs.
if [ -z "${SUMMARY_ONLY:-}" ]; then
  build/cli/paci fidelity --stages 2 --microbatches 4 --steps 8 --repeats "$repeats" \
    --kinds 1f1b,paci,zb-v,dualpipev,dualpipe --json "$out/fidelity_v.json" \
    --markdown docs/results/fidelity_v.md "$@"
fi
python3 - docs/results/fidelity_v.md "$(nproc)" "$(lscpu | sed -n 's/^Model name: *//p' | head -n 1)" <<'PY'
import sys
path, cores, cpu = sys.argv[1], sys.argv[2], sys.argv[3]
rows = {}
for line in open(path):
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) > 5 and cells[0] in ("1f1b", "paci", "zb-v", "dualpipev", "dualpipe"):
        rows[cells[0]] = cells
parts = []
for kind in ("zb-v", "dualpipev", "dualpipe", "1f1b", "paci"):
    if kind in rows:
        # schedule, predicted, measured median [min, max], error, inside the range, drift factor,
        # pooled (error), calibrated first (error)
        c = rows[kind]
        first = c[7].split("(")[-1].rstrip(")")
        parts.append(f"{kind} predicted {c[1]} s, measured {c[2]} s ({c[3]}; calibrated once "
                     f"first, {first})")
with open("docs/results/fidelity_v_headline.md", "w") as f:
    f.write(f"P=2, M=4, N=8 on {cores} cores, {cpu}: " + "; ".join(parts) +
            " ([fidelity_v.md](fidelity_v.md))\n")
print(open("docs/results/fidelity_v_headline.md").read().strip())
PY
