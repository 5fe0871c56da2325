#!/usr/bin/env bash
# The demo, end to end on a fresh Debian machine (about 3 minutes on 2 cores once built; the first
# install and build take 5-10 minutes more):
#  1. install dependencies, build (saying what it does and how far the build is);
#  2. generate the five schedules (P=4, M=4, N=4), validate them, print their static analysis
#     side by side;
#  3. compare them in the simulator (uniform costs; then GPT-2 Medium on 8 stages, and PACI beside
#     the zero-bubble schedules and interleaved 1F1B there); plan Llama 3 70B on 64 H100s with
#     paci plan (the fastest configuration that fits, staleness at most 1);
#  4. prepare the KJV corpus, train the default GPT with PACI on 4 stages for 50 steps, and check
#     that the versions the executor recorded equal paci analyze's; then the same run as one
#     process per stage under mpirun (MPI between them): the same losses, bit for bit;
#  5. calibrate a cost model here, simulate the same file, and write both traces;
#  6. put the simulator's prediction for PACI next to the range of three measured runs.
# Everything lands in out/demo/.
set -euo pipefail
cd "$(dirname "$0")/.."
P="${P:-4}" M="${M:-4}" N="${N:-4}"
mkdir -p out/demo
echo "== installing what paci needs (scripts/setup.sh: Debian packages; minutes the first time," \
  "seconds after; log: out/demo/setup.log)"
start=$SECONDS
if ! bash scripts/setup.sh >out/demo/setup.log 2>&1; then
  tail -n 20 out/demo/setup.log
  exit 1
fi
echo "   done in $((SECONDS - start)) s"
echo "== building paci into build/ (about 5 minutes on 2 cores the first time; log: out/demo/build.log)"
start=$SECONDS
# The build's progress on one line: CMake's percentage and the file it is at.
if ! bash scripts/build.sh --target paci 2>&1 | tee out/demo/build.log |
  sed -u -n 's/^\[ *\([0-9]*%\)\].* \([^ ]*\)$/\1 \2/p' |
  while read -r line; do printf '\r   %-74.74s' "$line"; done; then
  echo
  tail -n 30 out/demo/build.log
  exit 1
fi
printf '\r   done in %s s%-60s\n' "$((SECONDS - start))" ""
paci=build/cli/paci
files=()
for kind in gpipe 1f1b pipedream 2bw paci; do
  "$paci" schedule --kind "$kind" --stages "$P" --microbatches "$M" --steps "$N" -o "out/demo/$kind.json"
  files+=("out/demo/$kind.json")
done
echo "== paci validate (P=$P, M=$M, N=$N)"
"$paci" validate "${files[@]}"
echo
echo "== paci analyze, side by side"
"$paci" analyze "${files[@]}"
echo
echo "== paci compare: uniform costs (tf=1, tb=2), free links"
"$paci" compare --stages "$P" --microbatches "$M" --steps "$N" --tf 1 --tb 2
echo
echo "== paci compare: the paper's setting, GPT-2 Medium on 8 stages (analytic cost model)"
"$paci" costmodel --preset gpt2-medium --stages 8 --flops 4e14 -o out/demo/gpt2-medium-8.cost.json
"$paci" compare --stages 8 --microbatches 8 --steps 32 --cost out/demo/gpt2-medium-8.cost.json
echo
echo "== PACI beside Zero Bubble (zb-h1, zb-h2) and interleaved 1F1B: GPT-2 Medium, 8 devices, M=8"
RESULTS=out/demo/zero_bubble.md bash scripts/experiments/zero_bubble.sh >/dev/null
awk '/^\| schedule/ { p = 1 } p && /^$/ { exit } p' out/demo/zero_bubble.md
echo
echo "== paci plan: Llama 3 70B on 64 H100s, global batch 512 — the fastest configuration that fits"
echo "   in 76 GiB per GPU with staleness at most 1 (its files, trace and frontier plot: out/demo/plan/)"
"$paci" plan --preset llama3-70b --gpu h100-80gb --gpus 64 --global-batch 512 --max-staleness 1 \
  --top 5 -o out/demo/plan
echo
echo "== training: the default GPT on the KJV Bible, PACI on 4 stages, M=4, 50 steps"
bash scripts/prepare_data.sh
"$paci" schedule --kind paci --stages 4 --microbatches 4 --steps 50 -o out/demo/paci-train.json
"$paci" train --schedule out/demo/paci-train.json --metrics out/demo/train.metrics.jsonl \
  --report out/demo/train.report.json --trace out/demo/train.trace.json
"$paci" analyze out/demo/paci-train.json --json out/demo/paci-train.analysis.json >/dev/null
if command -v python3 >/dev/null; then
  python3 - <<'PY'
import json
r = json.load(open("out/demo/train.report.json"))
a = json.load(open("out/demo/paci-train.analysis.json"))
loss = r["loss"]
print(f"loss: step 1 {loss[0]:.3f} -> step 10 {loss[9]:.3f} -> step 50 {loss[-1]:.3f}; "
      f"validation {r['val_loss'][-1]['val_loss']:.3f}")
print("versions read by every F and B equal paci analyze:", r["versions"] == a["versions"])
print("max staleness per stage (measured):", [s["max_staleness"] for s in r["stages"]])
PY
fi
echo
echo "== the same run, one process per stage: mpirun -np 4 paci train --device cpu"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # Open MPI, when run as root
mpirun --oversubscribe -np 4 "$paci" train --device cpu --schedule out/demo/paci-train.json \
  --quiet --report out/demo/train-mpi.report.json
if command -v python3 >/dev/null; then
  python3 - <<'PY'
import json
one = json.load(open("out/demo/train.report.json"))
many = json.load(open("out/demo/train-mpi.report.json"))
print(f"{many['processes']} processes: losses equal the one-process run bit for bit:",
      many["loss"] == one["loss"], "; versions equal:", many["versions"] == one["versions"])
PY
fi
echo
echo "== calibrate here, then simulate the same file (the simulated trace)"
"$paci" calibrate --stages 4 --quiet -o out/demo/calibrated.cost.json
"$paci" simulate out/demo/paci-train.json --cost out/demo/calibrated.cost.json \
  --json out/demo/sim.report.json --trace out/demo/sim.trace.json | head -4
echo
echo "== the prediction against the measured range: PACI on 4 stages (M=4, N=8), 3 runs"
"$paci" fidelity --kinds paci --stages 4 --microbatches 4 --steps 8 --repeats 3 \
  --json out/demo/fidelity.json >/dev/null
if command -v python3 >/dev/null; then
  python3 - <<'PY'
import json
f = json.load(open("out/demo/fidelity.json"))
r = f["runs"][0]
print(f"predicted {r['predicted_makespan_s']:.2f} s; measured median {r['measured_makespan_s']:.2f} s "
      f"[{r['measured_min_s']:.2f}, {r['measured_max_s']:.2f}] over {len(r['measured_makespans_s'])} "
      f"runs: {100 * r['relative_error']:+.1f}% against the median, "
      f"{'inside' if r['inside_range'] else 'outside'} the measured range")
print(f"machine: {f['machine']['cores']} cores, {f['machine']['cpu']}, {f['machine']['blas']}")
PY
fi
echo
echo "wrote out/demo/: schedules, reports (*.report.json), metrics, and Chrome traces"
echo "(train.trace.json measured, sim.trace.json simulated) — open them at https://ui.perfetto.dev"
