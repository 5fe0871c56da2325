#!/usr/bin/env python3
"""Where paci's step misses the Zero Bubble rows: paci's per-stage pass times against the ones the
Zero Bubble authors profiled inside their training runs.

The paper's Table 6 (scripts/experiments/zb_profile.json, with its source) gives T_F, T_B (the
input gradient) and T_W (the weight gradient) of one pipeline stage and one micro-batch, measured
in the ZB-2p runs whose step times are rows of docs/results/published.md. paci predicts the same
three for each stage of the same configuration (the row's command in
scripts/experiments/published_runs.json). W is the weight-gradient GEMMs (and the bias
gradients) alone; F and B also hold the attention core and the memory-bound kernels, so F - W and
B - W isolate those. Writes docs/results/zb_profile.md.

    python3 scripts/experiments/zb_profile.py [--paci build/cli/paci] [--out docs/results]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from published import plan_command  # noqa: E402  (the published rows' exact commands)


def stage_times(paci, run):
    """paci's (forward, input-gradient, weight-gradient) ms of the stage with the most layers (the
    first such: a middle stage), and the largest of each over all stages."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "plan.json")
        p = subprocess.run(plan_command(paci, run, path), capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"zb_profile: paci plan failed for {run['id']}: {p.stderr.strip()}")
        stages = json.load(open(path))["plans"][0]["stages"]
    widest = max(stages, key=lambda s: (s["layers"], -s["stage"]))
    pick = lambda s: tuple(1e3 * s[k] for k in ("forward_s", "input_grad_s", "weight_grad_s"))
    largest = tuple(max(1e3 * s[k] for s in stages)
                    for k in ("forward_s", "input_grad_s", "weight_grad_s"))
    return pick(widest), widest["layers"], largest


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--paci", default=os.path.join(ROOT, "build", "cli", "paci"))
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "results"))
    a = ap.parse_args()
    if not os.access(a.paci, os.X_OK):
        sys.exit(f"zb_profile: no paci at {a.paci} (bash scripts/build.sh --target paci)")
    profile = json.load(open(os.path.join(HERE, "zb_profile.json")))
    runs = {r["id"]: r for r in json.load(open(os.path.join(HERE, "published_runs.json")))}
    lines = ["# paci's pass times against the Zero Bubble runs' own profile", "",
             "`python3 scripts/experiments/zb_profile.py` (after `bash scripts/build.sh --target paci`). "
             f"Measured: {profile['source']}. Units: {profile['units']}. Setup: {profile['setup']}.", "",
             "paci: the same configuration as the row of docs/results/published.md, the stage with "
             "the most layers (and, in brackets, the largest value over all stages). "
             "Ratio: measured / paci. W is the weight-gradient GEMMs; F − W and B − W are what the "
             "forward and the input-gradient backward do beyond that many GEMM FLOPs (the attention "
             "core, the memory-bound kernels).", "",
             "| run | stage layers | T_F measured / paci (max) | T_B measured / paci (max) | T_W measured / paci (max) | F / paci | B / paci | W / paci | (F − W) / paci's | (B − W) / paci's |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    ratios = {k: [] for k in ("F", "B", "W", "F-W", "B-W")}
    for row in profile["rows"]:
        run = runs[row["run"]]
        (f, b, w), layers, (fm, bm, wm) = stage_times(a.paci, run)
        r = {"F": row["T_F"] / f, "B": row["T_B"] / b, "W": row["T_W"] / w,
             "F-W": (row["T_F"] - row["T_W"]) / (f - w), "B-W": (row["T_B"] - row["T_W"]) / (b - w)}
        for k, v in r.items():
            ratios[k].append(v)
        lines.append(f"| {row['run']} | {layers} | {row['T_F']:.2f} / {f:.2f} ({fm:.2f}) | "
                     f"{row['T_B']:.2f} / {b:.2f} ({bm:.2f}) | {row['T_W']:.2f} / {w:.2f} ({wm:.2f}) | "
                     f"{r['F']:.3f} | {r['B']:.3f} | {r['W']:.3f} | {r['F-W']:.2f} | {r['B-W']:.2f} |")
    med = {k: statistics.median(v) for k, v in ratios.items()}
    span = {k: (min(v), max(v)) for k, v in ratios.items()}
    summary = (f"Over the {len(profile['rows'])} profiled runs, measured / paci (median, min–max): "
               f"forward {med['F']:.3f} ({span['F'][0]:.3f}–{span['F'][1]:.3f}), input gradient "
               f"{med['B']:.3f} ({span['B'][0]:.3f}–{span['B'][1]:.3f}), weight gradient "
               f"{med['W']:.3f} ({span['W'][0]:.3f}–{span['W'][1]:.3f}); beyond the GEMMs, forward "
               f"{med['F-W']:.2f}x ({span['F-W'][0]:.2f}–{span['F-W'][1]:.2f}) and input gradient "
               f"{med['B-W']:.2f}x ({span['B-W'][0]:.2f}–{span['B-W'][1]:.2f}) paci's.")
    lines[2:2] = [f"**{summary}**", ""]
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "zb_profile.md"), "w") as out:
        out.write("\n".join(lines) + "\n")
    print(summary)


if __name__ == "__main__":
    main()
