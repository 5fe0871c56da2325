#!/usr/bin/env bash
# How far this machine's speed drifts, and how much of it is paci's own: the same stages (the
# default GPT on P=2) timed alone, one F, B, U after another, for SEGMENT seconds at a time
# (`paci calibrate --drift`), alternating between a fresh process and one that has just trained
# (`--after-runs`: the PACI schedule of paci fidelity, M=4, N=8, trained RUNS times first), for
# SEGMENTS of each — 2 x 300 s fresh and 2 x 300 s trained by default, 20 minutes in all on top
# of the calibrations. A difference between the two kinds of process in neighbouring segments is
# paci's; what moves alike in both is the machine's.
# Writes out/drift/{fresh,trained}_N.json and docs/results/drift.md (scripts/experiments/drift.py).
#   SEGMENT=300 SEGMENTS=2 RUNS=8 WINDOW=30 by default.
set -euo pipefail
cd "$(dirname "$0")/../.."
segment="${SEGMENT:-300}" segments="${SEGMENTS:-2}" runs="${RUNS:-8}" window="${WINDOW:-30}"
if [ -z "${SUMMARY_ONLY:-}" ]; then
  bash scripts/setup.sh >/dev/null
  bash scripts/build.sh --target paci >/dev/null
  bash scripts/prepare_data.sh >/dev/null
fi
out=out/drift
mkdir -p "$out" docs/results
paci=build/cli/paci
for n in $(if [ -z "${SUMMARY_ONLY:-}" ]; then seq 1 "$segments"; fi); do
  echo "drift: segment $n of $segments, a fresh process ($segment s)" >&2
  "$paci" calibrate --stages 2 --drift "$segment" --drift-window "$window" --quiet \
    --details "$out/fresh_$n.json" >"$out/fresh_$n.txt"
  echo "drift: segment $n of $segments, after $runs training runs ($segment s)" >&2
  "$paci" calibrate --stages 2 --drift "$segment" --drift-window "$window" --quiet \
    --after-runs "$runs" --kind paci --microbatches 4 --steps 8 \
    --details "$out/trained_$n.json" >"$out/trained_$n.txt"
done
python3 scripts/experiments/drift.py "$out" "$segments" >docs/results/drift.md
echo "drift: wrote docs/results/drift.md" >&2
