#!/usr/bin/env bash
# The convergence study: builds paci, prepares the KJV corpus, trains every schedule (see
# convergence.py for the grid) and writes docs/results/convergence.{json,md} and SVG curves.
#   scripts/experiments/convergence.sh            # the full study (about 80 minutes on 2 cores)
#   scripts/experiments/convergence.sh --quick    # a smoke run (a few minutes; out/convergence-quick)
# Finished runs are reused from out/convergence*/; delete that folder to start over.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/setup.sh >/dev/null
command -v python3 >/dev/null || { echo "convergence: python3 is required" >&2; exit 2; }
bash scripts/build.sh --target paci >/dev/null
bash scripts/prepare_data.sh >/dev/null
exec python3 scripts/experiments/convergence.py "$@"
