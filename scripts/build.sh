#!/usr/bin/env bash
# Configures and builds paci into build/ (Release-with-debug-info, -j2 by default).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${PACI_JOBS:-2}"
cmake -S . -B build -DCMAKE_BUILD_TYPE="${PACI_BUILD_TYPE:-RelWithDebInfo}" "$@" >/dev/null
cmake --build build -j "$jobs"
