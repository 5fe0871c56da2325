#!/usr/bin/env bash
# PACI against the zero-bubble family in the paper's setting: GPT-2 Medium on 8
# devices, the analytic cost model (4e14 FLOP/s, 2e12 B/s per device, bf16), M = 8, 16, 32 and
# N = 4 steps, simulated: throughput, our bubble, the Zero Bubble paper's bubble, and peak memory
# per device for 1f1b, interleaved (2 chunks: a cost model of 16 stages, each device keeping the
# 8-stage balance's layers), zb-h1, zb-h2, 2bw and paci. Writes docs/results/zero_bubble.md (the README's table). A few seconds.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/build.sh --target paci >/dev/null
paci=build/cli/paci
out=out/zero_bubble
results="${RESULTS:-docs/results/zero_bubble.md}"
mkdir -p "$out" "$(dirname "$results")"
"$paci" costmodel --preset gpt2-medium --stages 8 --flops 4e14 -o "$out/cost8.json"
# Interleaved: each device keeps the layers the 8-stage balance gives it, split into its two
# chunks (device d: stages d and d + 8; the head's chunk, stage 15, gets the smaller half); a
# device with one layer takes a second from the device with the most.
partition16=$(python3 - "$out/cost8.json" <<'PY'
import json, re, sys
p8 = [int(x) for x in re.search(r"partition=([0-9,]+)",
                                 json.load(open(sys.argv[1]))["description"]).group(1).split(",")]
for d, n in enumerate(p8):  # two chunks need two layers: one from the device with the most
    if n < 2:
        most = max(range(len(p8)), key=lambda i: p8[i])
        p8[most] -= 2 - n
        p8[d] = 2
first = [(n + 1) // 2 for n in p8]
second = [n - f for n, f in zip(p8, first)]
if second[-1] > first[-1]:
    first[-1], second[-1] = second[-1], first[-1]
print(",".join(str(n) for n in first + second))
PY
)
"$paci" costmodel --preset gpt2-medium --stages 16 --partition "$partition16" --flops 4e14 \
  -o "$out/cost16.json"
kinds=(1f1b interleaved zb-h1 zb-h2 2bw paci)
for M in 8 16 32; do
  for kind in "${kinds[@]}"; do
    cost="$out/cost8.json"
    if [ "$kind" = interleaved ]; then cost="$out/cost16.json"; fi
    "$paci" schedule --kind "$kind" --stages 8 --microbatches "$M" --steps 4 -o "$out/$kind-M$M.json"
    "$paci" simulate "$out/$kind-M$M.json" --cost "$cost" --quiet --json "$out/$kind-M$M.report.json"
  done
done
python3 - "$out" "$results" "${kinds[@]}" <<'PY'
import json, sys
out, results, kinds = sys.argv[1], sys.argv[2], sys.argv[3:]
lines = ["GPT-2 Medium on 8 devices (analytic cost model: 4e14 FLOP/s and 2e12 B/s per device, bf16, "
         "one sequence of 1024 tokens per micro-batch, free links), N = 4 steps, simulated; "
         "interleaved with 2 chunks per device, each device keeping the layers the 8-stage "
         "balance gives it (the last device, with one, takes a second from a device with four). "
         "*bubble*: idle share of every device over the whole run; *zb bubble*: the Zero Bubble "
         "paper's (idle share within the longest device span); busiest device's work: its "
         "compute over the run; memory: peak per device, "
         "min–max over the 8 devices.", ""]
for M in (8, 16, 32):
    lines += [f"M = {M}:", "",
              "| schedule | tokens/s | vs 1f1b | bubble | zb bubble | busiest device's work (ms) | "
              "peak memory per device (GiB) | max staleness |",
              "|---|---|---|---|---|---|---|---|"]
    base = None
    for kind in kinds:
        r = json.load(open(f"{out}/{kind}-M{M}.report.json"))
        tps = r["throughput"]["tokens_per_s"]
        base = base or tps
        mem = [d["peak_memory_bytes"] / 2**30 for d in r["devices"]]
        stale = max(s["max_staleness"] for s in r["stages"])
        busiest = max(d["busy_s"] for d in r["devices"]) * 1e3
        lines.append(f"| {kind} | {tps:,.0f} | {tps / base:.3f}× | {100 * r['bubble_ratio']:.1f}% | "
                     f"{100 * r['zb_bubble_ratio']:.1f}% | {busiest:.1f} | {min(mem):.2f}–{max(mem):.2f} | "
                     f"{stale} |")
    lines.append("")
open(results, "w").write("\n".join(lines))
print("\n".join(lines))
PY
