#!/usr/bin/env bash
# What paci plan picks, and why, for three runs a user might rent, each with --max-staleness 0
# (synchronous schedules only) and 1:
#   - GPT-2 Medium on 8 A100 80GB in the PACI paper's setting (sequence 1024; global batch 128 and
#     256 sequences);
#   - Llama 3 70B on 64 H100s (global batch 512 sequences of 8192);
#   - GPT-3 175B on 1,024 A100 80GB (global batch 768 of 2048), beside Megatron-LM's configuration
#     MegaScale measured on that many GPUs (t=8, p=8, v=6, 11.9 s per step) and paci's prediction
#     for it.
# Writes out/plan/*.json and docs/results/plan.md (and plan_headline.md for the README), keeping
# the section scripts/experiments/plan_cpu.sh writes there; a minute or two on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ -z "${SUMMARY_ONLY:-}" ]; then
  bash scripts/setup.sh >/dev/null
  bash scripts/build.sh --target paci >/dev/null
fi
paci=build/cli/paci
out=out/plan
mkdir -p "$out" docs/results
run() {  # name, then paci plan's flags
  local name=$1
  shift
  for stale in 0 1; do
    echo "plan: $name, --max-staleness $stale" >&2
    "$paci" plan "$@" --max-staleness "$stale" --quiet --json "$out/${name}_s$stale.json"
  done
}
if [ -z "${SUMMARY_ONLY:-}" ]; then
  run gpt2m_b128 --preset gpt2-medium --gpu a100-80gb --gpus 8 --global-batch 128
  run gpt2m_b256 --preset gpt2-medium --gpu a100-80gb --gpus 8 --global-batch 256
  run llama3_70b --preset llama3-70b --gpu h100-80gb --gpus 64 --global-batch 512
  run gpt3_175b --preset gpt3-175b --gpu a100-80gb --gpus 1024 --global-batch 768
  # Megatron-LM's configuration for GPT-3 175B on 1,024 A100s as MegaScale ran it (its Table 1-2):
  "$paci" plan --preset gpt3-175b --vocab 64000 --heads 128 --gpu a100-80gb --gpus 1024 \
    --global-batch 768 --tp 8 --pp 8 --kind interleaved --chunks 6 --microbatch-size 1 \
    --recompute selective --sequence-parallel --distributed-optimizer --overlap-grad-reduce \
    --quiet --json "$out/gpt3_175b_megatron.json"
fi
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
GiB = 2**30
def knobs(p):
    s = f"{p['kind']} t={p['tp']}"
    if p.get("cp", 1) > 1:
        s += f" c={p['cp']}" + (" (all-gather)" if p.get("cp_comm") == "all_gather" else "")
    s += f" p={p['pp']} d={p['dp']}"
    if p["kind"] == "interleaved":
        s += f" v={p['chunks']}"
    s += f" b={p['microbatch_size']} M={p['microbatches']} {p['recompute']}"
    for k, short in (("sequence_parallel", "sp"), ("tp_comm_overlap", "tp-overlap")):
        if p.get(k):
            s += " " + short
    if p.get("zero", 0):
        s += f" zero{p['zero']}"
    if p.get("overlap_grad_reduce"):
        s += " grad-overlap"
    return s
def row(p):
    return (f"| {knobs(p)} | {p['step_s']:.3f} | {p['tokens_per_s']:,.0f} | {100 * p['mfu']:.1f}% | "
            f"{100 * p['bubble_ratio']:.1f}% | {p['peak_memory_bytes'] / GiB:.1f} | {p['max_staleness']} |")
HEAD = ("| configuration | step (s) | tokens/s | MFU | bubble | peak GiB | staleness |\n"
        "|---|---|---|---|---|---|---|")
cases = [("gpt2m_b128", "GPT-2 Medium on 8 A100 80GB, global batch 128 x 1024 tokens (the PACI paper's setting)"),
         ("gpt2m_b256", "GPT-2 Medium on 8 A100 80GB, global batch 256 x 1024 tokens"),
         ("llama3_70b", "Llama 3 70B on 64 H100 80GB, global batch 512 x 8192 tokens"),
         ("gpt3_175b", "GPT-3 175B on 1,024 A100 80GB, global batch 768 x 2048 tokens")]
lines = ["# What paci plan picks", "",
         "`bash scripts/experiments/plan.sh` — for each run, the search over every knob it leaves "
         "open (`paci plan` with only the model, GPU, GPU count and global batch; for the two "
         "large models also sequence parallelism and the distributed optimizer on and off), once "
         "with `--max-staleness 0` (synchronous schedules only) and once with `--max-staleness 1`. "
         "The memory limit is the GPU's memory less 4 GiB. Every number is paci's prediction "
         "(docs/costmodel.md; how such predictions compare with measured runs: published.md).", ""]
head = []
for name, title in cases:
    lines += [f"## {title}", ""]
    for stale in (0, 1):
        j = json.load(open(f"{out}/{name}_s{stale}.json"))
        s = j["search"]
        r = j["rejected"]
        lines += [f"`--max-staleness {stale}`: {s['configurations']:,} configurations, "
                  f"{s['simulated']:,} simulated, {r['pruned']:,} pruned by their bound, "
                  f"{r['out_of_memory']:,} out of memory, {r['too_stale']:,} too stale, "
                  f"{r['invalid']:,} invalid, in {s['seconds']:.2f} s on {s['jobs']} thread(s).", "",
                  HEAD] + [row(p) for p in j["plans"][:5]] + [""]
        if j["plans"]:
            best = j["plans"][0]
            if stale == 1:
                sync = json.load(open(f"{out}/{name}_s0.json"))["plans"]
                if sync:
                    gain = sync[0]["step_s"] / best["step_s"]
                    lines += [f"Best with staleness allowed: {knobs(best)}, {best['step_s']:.3f} s "
                              f"against the best synchronous plan's {sync[0]['step_s']:.3f} s "
                              f"({gain:.2f}x); bubble {100 * best['bubble_ratio']:.1f}% against "
                              f"{100 * sync[0]['bubble_ratio']:.1f}%, peak memory "
                              f"{best['peak_memory_bytes'] / GiB:.1f} against "
                              f"{sync[0]['peak_memory_bytes'] / GiB:.1f} GiB.", ""]
                    head.append(f"{title.split(' x ')[0]}: {knobs(best)} ({best['step_s']:.3f} s; "
                                f"{gain:.2f}x the best synchronous plan, {knobs(sync[0])})")
meg = json.load(open(f"{out}/gpt3_175b_megatron.json"))["plans"][0]
best = json.load(open(f"{out}/gpt3_175b_s0.json"))["plans"][0]
lines += ["## GPT-3 175B: Megatron-LM's configuration against paci's pick", "",
          "MegaScale (arXiv 2402.15627, Tables 1-2) ran Megatron-LM on 1,024 A100s with t=8, p=8, "
          "6 interleaved chunks and a global batch of 768 sequences, measured at 11.9 s per step "
          "(with its model: 128 heads, vocabulary 64,000). paci's prediction for that configuration "
          "(micro-batch 1, selective recomputation, sequence parallelism, the distributed optimizer "
          "and overlapped gradient reduction assumed — MegaScale does not state them):", "",
          HEAD, row(meg), "",
          f"paci's best synchronous pick for GPT-3 175B (above): {knobs(best)}, {best['step_s']:.3f} s.", ""]
# Keep the section scripts/experiments/plan_cpu.sh wrote (the CPU plans trained here).
import os
cpu = ""
if os.path.exists("docs/results/plan.md"):
    old = open("docs/results/plan.md").read()
    if "<!-- plan_cpu:" in old:
        cpu = "\n<!-- plan_cpu:" + old.split("<!-- plan_cpu:", 1)[1]
open("docs/results/plan.md", "w").write("\n".join(lines) + "\n" + cpu)
open("docs/results/plan_headline.md", "w").write("; ".join(head) + ".\n")
print("\n".join(lines))
PY
