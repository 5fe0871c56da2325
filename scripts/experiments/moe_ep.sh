#!/usr/bin/env bash
# Expert parallelism on this CPU: one process against mpirun --ep 2 and --ep 4 on the same MoE GPT
# (see moe_ep.py); writes docs/results/moe_ep.{json,md}. About 3 minutes on 2 cores.
#   scripts/experiments/moe_ep.sh [--repeats N] [--out DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/setup.sh >/dev/null
command -v mpirun >/dev/null || { echo "moe_ep: mpirun is required (scripts/setup.sh installs it)" >&2; exit 2; }
bash scripts/build.sh --target paci >/dev/null
bash scripts/prepare_data.sh >/dev/null
exec /usr/bin/python3 scripts/experiments/moe_ep.py "$@"
