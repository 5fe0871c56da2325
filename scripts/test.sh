#!/usr/bin/env bash
# Everything CI does: install dependencies, build into build/, run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh -DPACI_WERROR=ON
cd build
ctest --output-on-failure -j "${PACI_JOBS:-2}" --timeout 600
