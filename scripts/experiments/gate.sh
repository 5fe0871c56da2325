#!/usr/bin/env bash
# The convergence gate: trains the default GPT on one device for 3,000 steps (about 6
# minutes on 2 cores) and writes docs/results/gate.{md,svg}.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/setup.sh >/dev/null
bash scripts/build.sh --target paci >/dev/null
bash scripts/prepare_data.sh >/dev/null
mkdir -p out/gate
cmd="paci train --kind 1f1b --stages 1 --microbatches 1 --steps 3000 --lr 2e-3 --val-every 250 --val-microbatches 32"
start=$(date +%s)
build/cli/$cmd --metrics out/gate/metrics.jsonl --report out/gate/report.json --quiet
wall="$(( $(date +%s) - start )) s"
python3 scripts/experiments/gate.py out/gate/metrics.jsonl "$cmd" "$wall"
