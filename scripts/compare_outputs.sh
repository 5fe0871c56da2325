#!/usr/bin/env bash
# For a change that must not change what paci predicts: two paci binaries' simulated outputs for
# the same inputs, byte for byte. Every generator at P=4, M=8, N=4 (interleaved: 2 chunks a
# device), simulated with uniform costs and with GPT-2 Medium's analytic cost model: the report
# JSON, the Chrome trace, the table on stdout, and paci analyze's text. Prints one line per
# output and a count; exits 1 when any differs.
#
#   scripts/compare_outputs.sh OLD_PACI NEW_PACI     e.g. a parent commit's build/cli/paci
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: scripts/compare_outputs.sh OLD_PACI NEW_PACI" >&2
  exit 2
fi
old=$1 new=$2
for bin in "$old" "$new"; do
  [ -x "$bin" ] || { echo "compare_outputs: $bin is not an executable" >&2; exit 2; }
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$new" costmodel --preset gpt2-medium --stages 4 --flops 4e14 -o "$out/cost4.json" >/dev/null
"$new" costmodel --preset gpt2-medium --stages 8 --flops 4e14 -o "$out/cost8.json" >/dev/null
same=0 different=0
for kind in gpipe 1f1b pipedream 2bw paci zb-h1 zb-h2 interleaved; do
  chunks=() cost="$out/cost4.json"
  if [ "$kind" = interleaved ]; then chunks=(--chunks 2) cost="$out/cost8.json"; fi
  "$new" schedule --kind "$kind" --stages 4 --microbatches 8 --steps 4 "${chunks[@]}" \
    -o "$out/$kind.json"
  for side in old new; do
    bin=$old
    [ "$side" = new ] && bin=$new
    "$bin" simulate "$out/$kind.json" --json "$out/$kind.$side.report.json" \
      --trace "$out/$kind.$side.trace.json" --quiet
    "$bin" simulate "$out/$kind.json" --cost "$cost" --json "$out/$kind.$side.cost.report.json" \
      --trace "$out/$kind.$side.cost.trace.json" >"$out/$kind.$side.cost.table.txt"
    "$bin" analyze "$out/$kind.json" >"$out/$kind.$side.analyze.txt"
  done
  for output in report.json trace.json cost.report.json cost.trace.json cost.table.txt \
    analyze.txt; do
    if cmp -s "$out/$kind.old.$output" "$out/$kind.new.$output"; then
      same=$((same + 1))
      echo "$kind $output: identical"
    else
      different=$((different + 1))
      echo "$kind $output: DIFFERENT"
    fi
  done
done
echo "compare_outputs: $same identical, $different different"
[ "$different" -eq 0 ]
