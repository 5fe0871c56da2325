#!/usr/bin/env bash
# The mixture-of-experts GPT (8 experts, top-2, dropless: the default GPT's shape otherwise)
# measured on this CPU against the simulator's prediction: paci fidelity at P=2, M=4, N=8 with
# 1f1b, paci, zb-h1 and dualpipev, each schedule run REPEATS times round-robin with a calibration
# round before each round of runs. Writes docs/results/fidelity_moe.md (paci fidelity's table and
# the machine);
# REPEATS=5 by default, about 10 minutes on 2 cores. Run it on an otherwise idle machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/setup.sh >/dev/null
bash scripts/build.sh --target paci >/dev/null
bash scripts/prepare_data.sh >/dev/null
mkdir -p out/fidelity_moe docs/results
build/cli/paci fidelity --stages 2 --microbatches 4 --steps 8 --repeats "${REPEATS:-5}" \
  --kinds 1f1b,paci,zb-h1,dualpipev --experts 8 --top-k 2 --json out/fidelity_moe/fidelity_moe.json \
  --markdown docs/results/fidelity_moe.md "$@"
# The machine it ran on, under the table (scripts/readme_tables.py quotes it).
printf '\nMeasured on %s cores, %s.\n' "$(nproc)" \
  "$(lscpu | sed -n 's/^Model name: *//p' | head -n 1)" >>docs/results/fidelity_moe.md
