#!/usr/bin/env bash
# The demo: installs dependencies, builds, generates the five schedules at one configuration
# (P=4 stages, M=4 micro-batches per step, N=4 steps), validates them, prints their static
# analysis side by side, compares them in the simulator, and simulates PACI with a Chrome trace.
# Files land in out/demo/.
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
echo "== paci compare: uniform costs (tf=1, tb=2), free links"
"$paci" compare --stages "$P" --microbatches "$M" --steps "$N" --tf 1 --tb 2
echo
echo "== paci compare: the paper's setting, GPT-2 Medium on 8 stages (analytic cost model)"
"$paci" costmodel --preset gpt2-medium --stages 8 --flops 4e14 -o out/demo/gpt2-medium-8.cost.json
"$paci" compare --stages 8 --microbatches 8 --steps 32 --cost out/demo/gpt2-medium-8.cost.json
echo
echo "== paci simulate out/demo/paci.json, with link latency and bandwidth"
"$paci" analyze out/demo/paci.json --json out/demo/paci.analysis.json >/dev/null
"$paci" simulate out/demo/paci.json --tf 1 --tb 2 --tu 0.2 --latency 0.05 \
  --bandwidth 1e9 --message-bytes 100000000 --activation-bytes 50000000 --weight-bytes 400000000 \
  --json out/demo/paci.report.json --trace out/demo/paci.trace.json
echo
echo "wrote out/demo/: schedules (*.json), paci.analysis.json, paci.report.json (report JSON),"
echo "paci.trace.json — open it at https://ui.perfetto.dev or chrome://tracing"
