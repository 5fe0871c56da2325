#!/usr/bin/env bash
# Simulator fidelity on this machine: for every schedule at P=2 (M=4, N=8) calibrate, simulate,
# run the executor (median of 3 runs) and compare. Writes docs/results/fidelity.{json,md}.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/setup.sh >/dev/null
bash scripts/build.sh --target paci >/dev/null
bash scripts/prepare_data.sh >/dev/null
mkdir -p docs/results
build/cli/paci fidelity --stages 2 --microbatches 4 --steps 8 --repeats 3 \
  --json docs/results/fidelity.json --markdown docs/results/fidelity.md "$@"
