#!/usr/bin/env bash
# The demo: installs dependencies, builds, generates the five schedules at one configuration
# (P=4 stages, M=4 micro-batches per step, N=4 steps), validates them and prints their static
# analysis side by side. Files land in out/demo/.
set -euo pipefail
cd "$(dirname "$0")/.."
P="${P:-4}" M="${M:-4}" N="${N:-4}"
bash scripts/setup.sh >/dev/null
bash scripts/build.sh --target paci >/dev/null
paci=build/cli/paci
mkdir -p out/demo
files=()
for kind in gpipe 1f1b pipedream 2bw paci; do
  "$paci" schedule --kind "$kind" --stages "$P" --microbatches "$M" --steps "$N" -o "out/demo/$kind.json"
  files+=("out/demo/$kind.json")
done
echo "== paci validate (P=$P, M=$M, N=$N)"
"$paci" validate "${files[@]}"
echo
echo "== paci analyze, side by side"
"$paci" analyze "${files[@]}"
echo
echo "== paci analyze out/demo/paci.json"
"$paci" analyze out/demo/paci.json --json out/demo/paci.analysis.json
echo
echo "wrote out/demo/*.json (schedules) and out/demo/paci.analysis.json (report JSON)"
