#!/usr/bin/env python3
"""Summarises scripts/experiments/drift.sh: how far the stages' times move on this machine, and how
much of it follows the process (fresh, or just after training) rather than the machine.

    python3 scripts/experiments/drift.py OUT_DIR SEGMENTS > docs/results/drift.md
"""
import json
import statistics
import sys

out, segments = sys.argv[1], int(sys.argv[2])
ACTIONS = ("F", "B", "U")


def load(kind, n):
    return json.load(open(f"{out}/{kind}_{n}.json"))


def samples(j, stage, action, lo=0.0, hi=float("inf")):
    a = ACTIONS.index(action)
    return [x[2 + a] for x in j["alone"] if x[1] == stage and lo <= x[0] < hi]


def spread(v):
    return min(v), statistics.median(v), max(v)


first = load("fresh", 1)
machine = first["machine"]
lines = ["# How this machine's speed drifts, and paci's share of it", "",
         f"`bash scripts/experiments/drift.sh` on {machine['cores']} cores, {machine['cpu']}, "
         f"{machine['blas']}. Stage 0 and 1 of the default GPT at P=2, each timed alone (one F, B, "
         "U after another) for a segment of "
         f"{first['seconds']:.0f} s by `paci calibrate --drift`, in a fresh process and in one that "
         f"has just trained ({load('trained', 1)['after_runs']} runs of "
         f"{load('trained', 1)['kind']}, M=4, N=8, the kind of run paci fidelity makes), "
         "alternating: fresh 1, trained 1, fresh 2, trained 2, ... . Times in ms.", "",
         "| segment | process | stage 0 F: median [min, max] | window medians (30 s): min-max (between) | "
         "within a window (median) | first 10 s / the rest | load factor, median [min, max] |",
         "|---|---|---|---|---|---|---|"]
medians = {"fresh": [], "trained": []}
transient = {"fresh": [], "trained": []}
between, within = [], []
for n in range(1, segments + 1):
    for kind in ("fresh", "trained"):
        j = load(kind, n)
        f = samples(j, 0, "F")
        lo, med, hi = spread(f)
        medians[kind].append(med)
        s0 = next(s for s in j["summary"] if s["stage"] == 0 and s["action"] == "F")
        between.append(s0["between"])
        within.append(s0["within"])
        early = statistics.median(samples(j, 0, "F", 0, 10))
        rest = statistics.median(samples(j, 0, "F", 10))
        transient[kind].append(early / rest - 1)
        loads = [x[1] for x in j["loaded"]]
        wm = s0["window_medians"]
        lines.append(
            f"| {n} | {kind} | {1e3 * med:.2f} [{1e3 * lo:.2f}, {1e3 * hi:.2f}] | "
            f"{1e3 * wm['min']:.2f}-{1e3 * wm['max']:.2f} ({100 * s0['between']:.0f}%) | "
            f"{100 * s0['within']:.0f}% | {100 * (early / rest - 1):+.1f}% | "
            f"{statistics.median(loads):.3f} [{min(loads):.3f}, {max(loads):.3f}] |")
pairs = [t / f - 1 for f, t in zip(medians["fresh"], medians["trained"])]
fresh_all = statistics.median(medians["fresh"])
trained_all = statistics.median(medians["trained"])
lines += ["",
          "What it says:", "",
          f"- **The machine's drift.** Inside one process the 30-second medians of stage 0's F move by "
          f"{100 * min(between):.0f}-{100 * max(between):.0f}% of their median (max - min), and the samples "
          f"inside one 30-second window by {100 * min(within):.0f}-{100 * max(within):.0f}%: the same "
          "computation, on the same data, in the same process.",
          f"- **The process's share.** Stage 0's F median in the process that had just trained against the "
          f"fresh one before it: {', '.join(f'{100 * p:+.1f}%' for p in pairs)} (segment by segment); over "
          f"all segments {1e3 * trained_all:.2f} ms against {1e3 * fresh_all:.2f} ms "
          f"({100 * (trained_all / fresh_all - 1):+.1f}%).",
          f"- **Right after training.** The first 10 s of a segment against the rest of it: trained "
          f"{', '.join(f'{100 * t:+.1f}%' for t in transient['trained'])}; fresh "
          f"{', '.join(f'{100 * t:+.1f}%' for t in transient['fresh'])}.", ""]
print("\n".join(lines))
