#!/usr/bin/env bash
# The MoE training study: builds paci, prepares the KJV corpus, trains the dense GPT and two MoE
# GPTs of the same FLOPs a token (see moe_train.py) and writes docs/results/moe_train.{json,md,svg}.
#   scripts/experiments/moe_train.sh                                  # 3 seeds x 400 steps (~12 min, 2 cores)
#   scripts/experiments/moe_train.sh --steps 40 --seeds 1 --out out/moe-quick --results out/moe-quick
# Finished runs are reused from the --out folder (out/moe_train); delete it to start over.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/setup.sh >/dev/null
command -v python3 >/dev/null || { echo "moe_train: python3 is required" >&2; exit 2; }
bash scripts/build.sh --target paci >/dev/null
bash scripts/prepare_data.sh >/dev/null
exec /usr/bin/python3 scripts/experiments/moe_train.py "$@"
