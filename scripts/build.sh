#!/usr/bin/env bash
# Configures and builds paci into build/ (RelWithDebInfo, -j2 by default).
# Arguments starting with -D go to CMake's configure step; the rest to the build step
# (e.g. `scripts/build.sh --target paci`).
set -euo pipefail
cd "$(dirname "$0")/.."
configure=() build=()
for arg in "$@"; do
  case "$arg" in
    -D*) configure+=("$arg") ;;
    *) build+=("$arg") ;;
  esac
done
cmake -S . -B build -DCMAKE_BUILD_TYPE="${PACI_BUILD_TYPE:-RelWithDebInfo}" "${configure[@]}" >/dev/null
cmake --build build -j "${PACI_JOBS:-2}" "${build[@]}"
