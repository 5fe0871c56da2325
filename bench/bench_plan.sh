#!/usr/bin/env bash
# paci plan's speed: runs build/bench/bench_plan (one configuration evaluated in-process, 9
# repetitions; the whole default search for Llama 3 70B on 1,024 H100s and for GPT-3 175B on 1,024
# A100s, 3 repetitions each, on one thread and on every core) and writes
# docs/results/bench_plan.md (min / median / max, the configurations searched, simulated and
# pruned, the machine) and bench_plan_headline.md (one line for the tables). The goal, 10,000
# configurations a second on one core, is reported against, not asserted: a benchmark reports.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -n "${SUMMARY_ONLY:-}" ] || bash scripts/build.sh --target bench_plan >/dev/null
out=out/bench_plan
mkdir -p "$out" docs/results
if [ -z "${SUMMARY_ONLY:-}" ]; then
build/bench/bench_plan --benchmark_format=json --benchmark_out="$out/bench_plan.json" \
  --benchmark_out_format=json >/dev/null
fi
cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -n 1)
python3 - "$out/bench_plan.json" "$(nproc) cores, ${cpu:-unknown CPU}" <<'PY'
import json, statistics, sys
runs = json.load(open(sys.argv[1]))["benchmarks"]
machine = sys.argv[2]
def reps(name):  # run_name: "BM_Search/<name>/iterations:1/repeats:3"
    return [b for b in runs if f"/{name}/" in b["run_name"] + "/" and b.get("run_type") == "iteration"]
GOAL = 10000
SECONDS_GOAL = 2  # the whole default space for Llama 3 405B on 16,384 H100s, one core
lines = ["# paci plan's speed", "",
         f"`bash bench/bench_plan.sh` on {machine}. Each search is the whole default space "
         "(every knob over its range: tensor degree, pipeline degree, micro-batch size, all eight "
         "kinds, chunks, recomputation, the four switches off and on, the partitions), "
         "configurations per second = "
         "configurations considered / wall time; min / median / max over the repetitions.", "",
         "| benchmark | configurations | simulated | pruned | seconds a search (min / median / max) | configurations / s (min / median / max) | goal (one core) |",
         "|---|---|---|---|---|---|---|"]
head = []
for name, title in (("llama3_70b_1024_h100_one_core", "Llama 3 70B, 1,024 H100s, one thread"),
                    ("gpt3_175b_1024_a100_one_core", "GPT-3 175B, 1,024 A100s, one thread"),
                    ("llama3_405b_16384_h100_one_core", "Llama 3 405B, 16,384 H100s, one thread"),
                    ("llama3_70b_1024_h100_every_core", "Llama 3 70B, 1,024 H100s, every core")):
    r = reps(name)
    if not r:
        continue
    rate = sorted(b["configurations_per_s"] for b in r)
    med = statistics.median(rate)
    secs = sorted(b["real_time"] for b in r)  # seconds (kSecond)
    goal = "" if "every" in name else (f"{med / GOAL:.2f}x of {GOAL:,}" )
    if "405b" in name:
        goal = f"{statistics.median(secs):.2f} s of {SECONDS_GOAL} s"
    lines.append(f"| {title} | {int(r[0]['configurations']):,} | {int(r[0]['simulated']):,} | "
                 f"{int(r[0]['pruned']):,} | {secs[0]:.2f} / {statistics.median(secs):.2f} / "
                 f"{secs[-1]:.2f} | {rate[0]:,.0f} / {med:,.0f} / {rate[-1]:,.0f} | {goal} |")
    if "one_core" in name:
        head.append(f"{title.split(',')[0]}: {med:,.0f} configurations/s on one core "
                    f"({rate[0]:,.0f}-{rate[-1]:,.0f}), {statistics.median(secs):.2f} s a search")
for name, title in (("gpt3_175b_p8_m64_1f1b", "one configuration, GPT-3 175B, p=8, M=64, 1F1B"),
                    ("gpt3_175b_p8_m64_paci", "one configuration, GPT-3 175B, p=8, M=64, PACI")):
    r = reps(name)
    if not r:
        continue
    ms = sorted(b["real_time"] for b in r)  # milliseconds
    lines.append(f"| {title} | 1 | 1 | 0 | {ms[0]:.3f} / {statistics.median(ms):.3f} / "
                 f"{ms[-1]:.3f} ms each | | |")
lines += ["", f"Goal: {GOAL:,} configurations a second on one core (about 60x Calculon's "
          "116-170 a second per core)."]
open("docs/results/bench_plan.md", "w").write("\n".join(lines) + "\n")
open("docs/results/bench_plan_headline.md", "w").write(
    "; ".join(head) + f" (goal {GOAL:,}; {machine})\n")
print("\n".join(lines))
PY
