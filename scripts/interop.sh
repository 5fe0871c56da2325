#!/usr/bin/env bash
# The interop stage (docs/interop.md): what paci plan emits, judged by PyTorch's, torchtitan's and
# Megatron-LM's own code. Installs tests/interop/requirements.txt (pinned) into a virtual
# environment cached under ~/.cache/paci-interop (one per hash of that file; an install that did
# not finish is redone), then runs tests/interop/run_matrix.py on build/cli/paci.
#   scripts/interop.sh [--megatron-lm DIR] [--work DIR] [--only TEXT]   (run_matrix.py's options)
# PACI_INTEROP_CACHE names another cache folder.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
req="$root/tests/interop/requirements.txt"
paci="$root/build/cli/paci"
[ -x "$paci" ] || { echo "interop: $paci not built (scripts/build.sh)" >&2; exit 2; }
cache="${PACI_INTEROP_CACHE:-${HOME:-/root}/.cache/paci-interop}"
hash=$(sha256sum "$req" | cut -c1-16)
venv="$cache/venv-$hash"
mkdir -p "$cache"
exec 9>"$cache/lock"
flock 9  # one install at a time on a machine
if [ ! -f "$venv/.complete" ]; then
  start=$(date +%s)
  echo "interop: installing the pinned tools into $venv (a few minutes, once)"
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv"
  ok=0
  for try in 1 2 3; do
    if "$venv/bin/pip" install --quiet --disable-pip-version-check --no-input -r "$req"; then
      ok=1; break
    fi
    echo "interop: pip install failed (try $try of 3)" >&2
    sleep $((try * 15))
  done
  [ "$ok" = 1 ] || { echo "interop: could not install $req from PyPI" >&2; exit 1; }
  "$venv/bin/python" -W ignore -c "import torch, torchtitan, megatron.core" 2>/dev/null ||
    { echo "interop: the installed tools do not import" >&2; exit 1; }
  touch "$venv/.complete"
  echo "interop: installed in $(( $(date +%s) - start )) s"
  # Older environments of other requirement files: 6 GB each.
  for old in "$cache"/venv-*; do [ "$old" = "$venv" ] || rm -rf "$old"; done
fi
flock -u 9
export TORCHINDUCTOR_COMPILE_THREADS=1 PYTHONWARNINGS=ignore
exec "$venv/bin/python" "$root/tests/interop/run_matrix.py" --paci "$paci" \
  --python "$venv/bin/python" --jobs "${PACI_JOBS:-2}" "$@"
