#!/usr/bin/env bash
# Installs every Debian package paci needs to build and test. Non-interactive and idempotent:
# packages already present are left alone, and apt is only called when something is missing.
set -euo pipefail

packages=(
  cmake g++ make pkg-config
  libboost-graph-dev libboost-program-options-dev
  nlohmann-json3-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenblas-dev zlib1g-dev
  openmpi-bin libopenmpi-dev
  python3-matplotlib python3-venv
  clang libclang-rt-dev
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null
