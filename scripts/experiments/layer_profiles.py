#!/usr/bin/env python3
"""paci's pass times against pass times measured inside training runs.

scripts/experiments/layer_profiles.json holds, with their sources:
- the Zero Bubble paper's profile (Table 6): T_F, T_B (the input gradient) and T_W (the weight
  gradient) of one pipeline stage and one micro-batch, measured in the ZB-2p runs whose step
  times are rows of docs/results/published.md. paci predicts the same three for the same
  configuration (the row's command in scripts/experiments/published_runs.json), for the stage
  with the most layers. W is the weight-gradient GEMMs alone; F and B also hold the attention
  core and the memory-bound kernels, so F - W and B - W isolate those.
- Korthikanti et al.'s Table 4: the forward and the backward of one layer of a 22B model on
  A100s with tensor parallelism 8. paci's layer: the difference of two one-stage plans, 8 and 4
  layers, over 4.
Writes docs/results/layer_profiles.md.

    python3 scripts/experiments/layer_profiles.py [--paci build/cli/paci] [--out docs/results]
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

PASSES = ("forward_s", "input_grad_s", "weight_grad_s", "backward_s")


def first_stage_plan(cmd, what):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "plan.json")
        p = subprocess.run([*cmd[:2], "--json", path, *cmd[2:]], capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"layer_profiles: paci plan failed for {what}: {p.stderr.strip()}")
        return json.load(open(path))["plans"][0]["stages"]


def widest_stage(paci, run):
    """paci's ms per pass of the stage with the most layers (the first such: a middle stage)."""
    cmd = plan_command(paci, run, "unused")
    i = cmd.index("--json")
    stages = first_stage_plan(cmd[:i] + cmd[i + 2:], run["id"])
    widest = max(stages, key=lambda s: (s["layers"], -s["stage"]))
    return {k: 1e3 * widest[k] for k in PASSES}, widest["layers"]


def one_layer(paci, source, row):
    """paci's ms per pass of one layer: (8-layer stage - 4-layer stage) / 4."""
    m, r = source["model"], source["run"]
    out = []
    for layers in (4, 8):
        cmd = [paci, "plan", "--quiet", "--arch", m["arch"], "--layers", str(layers),
               "--d-model", str(m["d_model"]), "--heads", str(m["heads"]),
               "--kv-heads", str(m["kv_heads"]), "--ffn", str(m["ffn"]), "--vocab", str(m["vocab"]),
               "--seq-len", str(m["seq_len"]),
               "--tied-embeddings", "yes" if m["tied_embeddings"] else "no", "--gpu", r["gpu"],
               "--gpus", str(r["gpus"]), "--global-batch", str(r["microbatch_size"] * r["gpus"] // r["tp"]),
               "--tp", str(r["tp"]), "--pp", str(r["pp"]), "--microbatch-size", str(r["microbatch_size"]),
               "--kind", r["kind"], "--attention", r["attention"], "--zero", str(r["zero"]),
               "--recompute", row["recompute"],
               "--sequence-parallel", "on" if row["sequence_parallel"] else "off",
               "--tp-comm-overlap", "off", "--overlap-grad-reduce", "off",
               "--partition", str(layers), "--memory-limit", "1e15"]
        out.append(first_stage_plan(cmd, row["run"])[0])
    return {k: 1e3 * (out[1][k] - out[0][k]) / 4 for k in PASSES}


def spread(values):
    return f"{statistics.median(values):.3f} ({min(values):.3f}–{max(values):.3f})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--paci", default=os.path.join(ROOT, "build", "cli", "paci"))
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "results"))
    a = ap.parse_args()
    if not os.access(a.paci, os.X_OK):
        sys.exit(f"layer_profiles: no paci at {a.paci} (bash scripts/build.sh --target paci)")
    data = json.load(open(os.path.join(HERE, "layer_profiles.json")))
    runs = {r["id"]: r for r in json.load(open(os.path.join(HERE, "published_runs.json")))}
    body, summaries = [], []
    for source in data["sources"]:
        body += [f"## {source['name']}", "",
                 f"Measured: {source['source']}. Units: {source['units']}. Setup: {source['setup']}.", ""]
        if source["kind"] == "stage":
            body += ["paci: the same configuration as the row of docs/results/published.md, the "
                     "stage with the most layers. Ratio: measured / paci.", "",
                     "| run | stage layers | T_F measured / paci | T_B measured / paci | T_W measured / paci | F | B | W | F − W | B − W |",
                     "|---|---|---|---|---|---|---|---|---|---|"]
            ratios = {k: [] for k in ("F", "B", "W", "F-W", "B-W")}
            for row in source["rows"]:
                p, layers = widest_stage(a.paci, runs[row["run"]])
                f, b, w = p["forward_s"], p["input_grad_s"], p["weight_grad_s"]
                r = {"F": row["T_F"] / f, "B": row["T_B"] / b, "W": row["T_W"] / w,
                     "F-W": (row["T_F"] - row["T_W"]) / (f - w),
                     "B-W": (row["T_B"] - row["T_W"]) / (b - w)}
                for k, v in r.items():
                    ratios[k].append(v)
                body.append(f"| {row['run']} | {layers} | {row['T_F']:.2f} / {f:.2f} | "
                            f"{row['T_B']:.2f} / {b:.2f} | {row['T_W']:.2f} / {w:.2f} | "
                            f"{r['F']:.3f} | {r['B']:.3f} | {r['W']:.3f} | {r['F-W']:.2f} | {r['B-W']:.2f} |")
            summaries.append(
                f"{source['name']}, {len(source['rows'])} runs, measured / paci, median (min–max): "
                f"forward {spread(ratios['F'])}, input gradient {spread(ratios['B'])}, weight "
                f"gradient {spread(ratios['W'])}; beyond the GEMMs (F − W, B − W) "
                f"{spread(ratios['F-W'])} and {spread(ratios['B-W'])}")
        else:
            body += ["paci: one layer, the difference of an 8-layer and a 4-layer one-stage plan, "
                     "over 4. Ratio: measured / paci.", "",
                     "| run | forward measured / paci | backward measured / paci | forward + backward measured / paci | ratio |",
                     "|---|---|---|---|---|"]
            totals = []
            for row in source["rows"]:
                p = one_layer(a.paci, source, row)
                f, b = p["forward_s"], p["backward_s"]
                total = (row["F"] + row["B"]) / (f + b)
                totals.append(total)
                body.append(f"| {row['run']} | {row['F']:.1f} / {f:.2f} | {row['B']:.1f} / {b:.2f} | "
                            f"{row['F'] + row['B']:.1f} / {f + b:.2f} | {total:.3f} |")
            summaries.append(f"{source['name']}, {len(source['rows'])} layer configurations, "
                             f"forward + backward measured / paci, median (min–max): {spread(totals)}")
        body.append("")
    lines = ["# paci's pass times against those measured inside training", "",
             "`python3 scripts/experiments/layer_profiles.py` (after `bash scripts/build.sh --target paci`). "
             "The measurements are held out: none set a constant.", ""]
    lines += [f"- **{s}.**" for s in summaries] + [""] + body
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "layer_profiles.md"), "w") as out:
        out.write("\n".join(lines))
    for s in summaries:
        print(s)


if __name__ == "__main__":
    main()
