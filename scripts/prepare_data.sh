#!/usr/bin/env bash
# Prepares the default corpus: the King James Bible from Debian's bible-kjv package as data/kjv.txt,
# then byte-level llm.c token shards data/kjv_train.bin and data/kjv_val.bin (the last 5% of the
# text). Idempotent: a step whose outputs exist and are newer than its inputs is skipped.
#
#   scripts/prepare_data.sh [--val-fraction F] [--force]
#
# PACI_BINARY overrides the paci executable (default build/cli/paci, built when missing).
# Your own text instead: build/cli/paci data tokenize MY.txt --train a.bin --val b.bin (docs/data.md).
set -euo pipefail
cd "$(dirname "$0")/.."

val_fraction=0.05
force=0
while [ $# -gt 0 ]; do
  case "$1" in
    --val-fraction) val_fraction="$2"; shift 2 ;;
    --force) force=1; shift ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "prepare_data: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

data=data
text="$data/kjv.txt" train="$data/kjv_train.bin" val="$data/kjv_val.bin"
paci="${PACI_BINARY:-build/cli/paci}"
mkdir -p "$data"

# True when $1 is missing or older than any of the following files.
stale() {
  local out="$1"; shift
  [ "$force" -eq 1 ] && return 0
  [ -e "$out" ] || return 0
  local in
  for in in "$@"; do [ "$in" -nt "$out" ] && return 0; done
  return 1
}

# 1. The bible command and its data (Debian's bible-kjv).
if command -v bible >/dev/null 2>&1; then
  echo "prepare_data: bible-kjv present"
else
  echo "prepare_data: installing bible-kjv"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  if ! $sudo apt-get install -y -qq bible-kjv </dev/null >/dev/null 2>&1; then
    $sudo apt-get update -qq </dev/null
    $sudo apt-get install -y -qq bible-kjv </dev/null >/dev/null
  fi
fi

# 2. The whole text, Genesis 1:1 to Revelation 22:21, in bible's default layout (book and chapter
# headings, numbered verses) with lines wrapped at 79 columns whatever the terminal: -l79 pins the
# width that would otherwise come from $COLUMNS. stdin from /dev/null: never interactive.
if stale "$text" "$0" /usr/lib/bible.data; then
  bible -l79 "Genesis 1:1-Revelation 22:21" </dev/null >"$text.tmp.$$"
  mv "$text.tmp.$$" "$text"
  echo "prepare_data: wrote $text ($(wc -c <"$text") bytes)"
else
  echo "prepare_data: $text up to date ($(wc -c <"$text") bytes)"
fi

# 3. The paci binary ($PACI_BINARY, else build/cli/paci, built when missing or without `data`).
if ! "$paci" data --help >/dev/null 2>&1; then
  if [ -n "${PACI_BINARY:-}" ]; then
    echo "prepare_data: PACI_BINARY=$PACI_BINARY has no 'paci data' command" >&2
    exit 2
  fi
  echo "prepare_data: building $paci"
  bash scripts/build.sh --target paci >/dev/null
fi

# 4. Byte-level token shards: the last val_fraction of the tokens is the validation shard. The
# fraction used is kept in $split so that another --val-fraction redoes the split.
split="$data/kjv_split.txt"
if [ "$(cat "$split" 2>/dev/null)" != "$val_fraction" ] || stale "$train" "$text" "$0" \
  || stale "$val" "$text" "$0"; then
  "$paci" data tokenize "$text" --train "$train" --val "$val" --val-fraction "$val_fraction" \
    | sed 's/^/prepare_data: /'
  echo "$val_fraction" >"$split"
else
  echo "prepare_data: $train and $val up to date"
fi
for shard in "$train" "$val"; do
  "$paci" data info "$shard" | head -1 | sed 's/^/prepare_data: /'
done
