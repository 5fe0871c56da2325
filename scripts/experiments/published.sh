#!/usr/bin/env bash
# paci plan against published, measured GPU training runs (scripts/experiments/published_runs.json:
# each run's configuration, measured step time, source and assumptions): writes
# docs/results/published.md and docs/results/published.json. A few seconds once paci is built.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/setup.sh >/dev/null
bash scripts/build.sh --target paci >/dev/null
python3 scripts/experiments/published.py "$@"
