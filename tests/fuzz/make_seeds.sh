#!/usr/bin/env bash
# Regenerates the seed corpora in tests/fuzz/corpus/ with paci itself (build/cli/paci): every
# schedule kind in each format, cost models, a token shard, an llm.c model file, a checkpoint and
# measured reports of a tiny model, plus the hand-written golden files of tests/golden/ and the
# interop matrix's launches. The seeds
# are committed; run this only when a format changes.
#   tests/fuzz/make_seeds.sh [PACI_BINARY]
set -euo pipefail
cd "$(dirname "$0")/../.."
paci="${1:-build/cli/paci}"
corpus=tests/fuzz/corpus
rm -rf "$corpus"
mkdir -p "$corpus"/{schedule_json,schedule_csv,schedule_text,cost_model,shard,llmc,state,report,launch}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for kind in gpipe 1f1b pipedream 2bw paci zb-h1 zb-h2 interleaved; do
  for format in json csv text; do
    ext=$format
    if [ "$format" = text ]; then ext=txt; fi
    "$paci" schedule --kind "$kind" --stages 2 --microbatches 2 --steps 2 \
      --format "$format" -o "$corpus/schedule_$format/$kind.$ext"
  done
done
# DualPipeV needs M >= 2P: its own line, with the overlapped pairs' cells.
for format in json csv text; do
  ext=$format
  if [ "$format" = text ]; then ext=txt; fi
  "$paci" schedule --kind dualpipev --stages 2 --microbatches 4 --steps 1 --format "$format" \
    -o "$corpus/schedule_$format/dualpipev.$ext"
done
cp tests/golden/small.json "$corpus/schedule_json/"
cp tests/golden/small.csv tests/golden/pytorch_*.csv "$corpus/schedule_csv/"
cp tests/golden/small.txt "$corpus/schedule_text/"

"$paci" costmodel --preset tiny --stages 2 -o "$corpus/cost_model/gpt_tiny.json"
"$paci" costmodel --preset gpt2-small --stages 4 --bandwidth inf -o "$corpus/cost_model/gpt2_small.json"
cp tests/golden/costmodel_*.json "$corpus/cost_model/"

head -c 2000 docs/README.md.in >"$work/text.txt"
"$paci" data tokenize "$work/text.txt" --train "$corpus/shard/readme_2000.bin" >/dev/null

tiny=(--layers 2 --heads 1 --d-model 4 --seq-len 4 --batch 1 --val-data none --quiet)
"$paci" train --kind 1f1b --stages 2 --microbatches 2 --steps 1 "${tiny[@]}" \
  --save "$corpus/state/tiny_2stages.state" --export-llmc "$corpus/llmc/tiny.bin"
# A mixture of experts: the state's config.moe entry and its block sections.
"$paci" train --kind 1f1b --stages 2 --microbatches 2 --steps 1 "${tiny[@]}" --experts 2 --top-k 1 \
  --expert-hidden 4 --save "$corpus/state/tiny_moe.state"
for kind in 1f1b paci pipedream zb-h1; do
  "$paci" train --kind "$kind" --stages 2 --microbatches 2 --steps 1 "${tiny[@]}" \
    --report "$work/report.json"
  # The report's shape, not its pretty-printing: one line keeps the seed small.
  /usr/bin/python3 -c 'import json,sys; json.dump(json.load(open(sys.argv[1])), open(sys.argv[2], "w"), separators=(",", ":"))' \
    "$work/report.json" "$corpus/report/$kind.json"
done
cp tests/golden/tiny.state "$corpus/state/"
# A cut of a running PACI pipeline (paci.state/2, with blobs): saved after step 1, then the run
# kills itself before its end (exit 137 is expected).
"$paci" train --kind paci --stages 2 --microbatches 2 --steps 3 "${tiny[@]}" --save-every 1 \
  --save "$corpus/state/paci_cut.state" --kill-at 1F5 || [ $? -eq 137 ]
# Launches as users write them: the interop matrix's (tests/interop/run_matrix.py, READS), each
# behind the fuzz target's tool byte (m: Megatron-LM, t: torchtitan).
/usr/bin/python3 - "$corpus/launch" <<'PY'
import importlib.util, os, re, sys
spec = importlib.util.spec_from_file_location("run_matrix", "tests/interop/run_matrix.py")
matrix = importlib.util.module_from_spec(spec)
spec.loader.exec_module(matrix)
for name, tool, _gpus, launch in matrix.READS:
    stem = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")[:60]
    with open(os.path.join(sys.argv[1], stem + ".txt"), "w") as f:
        f.write(("m" if tool == "megatron" else "t") + launch)
PY
du -sh "$corpus"/*
