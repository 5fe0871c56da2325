#!/usr/bin/env bash
# Downloads (never installs) the Debian packages that scripts/gpu_check.sh builds against, into
# out/gpu-deps/ (or $1), for a GPU machine that cannot reach a package registry: bring that folder
# along with the working tree and gpu_check.sh unpacks it under /tmp/paci-deps when setup.sh fails.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:-out/gpu-deps}
mkdir -p "$dest"
packages=(
  libfmt-dev libfmt9 nlohmann-json3-dev zlib1g-dev
  libopenblas-dev libopenblas0 libopenblas-pthread-dev libopenblas0-pthread libgfortran5
  googletest libgtest-dev libgmock-dev libbenchmark-dev libbenchmark1debian
  libboost1.74-dev libboost-graph1.74-dev libboost-graph1.74.0 libboost-regex1.74-dev
  libboost-serialization1.74-dev libboost-test1.74-dev
  libboost-program-options1.74-dev libboost-program-options1.74.0
  pkgconf pkgconf-bin libpkgconf3
)
(cd "$dest" && apt-get download "${packages[@]}")
du -sh "$dest"
