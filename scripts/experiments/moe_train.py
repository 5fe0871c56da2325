#!/usr/bin/env python3
"""The mixture-of-experts GPT trained on the bundled corpus (KJV) beside the dense GPT whose MLP
costs the same FLOPs a token: paci's default model (4 blocks, C = 128, T = 128, B = 16), and the
same model with 8 SwiGLU experts a block, top-2, with and without a shared expert (the expert
width paci picks by default, 8C / (3 * active experts), so that each token's MLP FLOPs equal the
dense 4C GELU MLP's: docs/model.md). Same steps, learning rate, data order and seeds; the loss
compared is the cross-entropy (the load-balancing loss is trained and reported apart).

Writes docs/results/moe_train.json, moe_train.md and moe_train.svg (validation loss against
tokens). Run it through scripts/experiments/moe_train.sh, which builds paci and prepares the data;
`moe_train.py --steps 40 --seeds 1 --out out/moe-quick` is a smoke run. Every number comes from a
paci run made by this script.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

import plots

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACI = os.environ.get("PACI_BIN") or os.path.join(ROOT, "build", "cli", "paci")
C, LAYERS, SEQ, BATCH, VOCAB = 128, 4, 128, 16, 256

# name, flags, description
MODELS = [
    ("dense", [], "dense: GELU MLP of width 4C = 512"),
    ("moe-8x2", ["--experts", "8", "--top-k", "2"], "MoE: 8 experts of width 171, top-2"),
    ("moe-8x2-shared", ["--experts", "8", "--top-k", "2", "--shared-expert"],
     "MoE: 8 experts of width 114, top-2, and a shared expert"),
]
COLORS = {"dense": "#1f77b4", "moe-8x2": "#d62728", "moe-8x2-shared": "#2ca02c"}


def expert_width(flags):
    """paci's default (exec/train_setup.cpp): H = round(8C / (3 * active))."""
    if "--experts" not in flags:
        return 0
    active = 2 + (1 if "--shared-expert" in flags else 0)
    return (8 * C + 3 * active // 2) // (3 * active)


def flops_per_token(flags):
    """Forward matmul FLOPs a token, the blocks' and the head's (model/config.cpp's formula)."""
    if "--experts" not in flags:
        per_block = 12 * C * C
    else:
        experts = int(flags[flags.index("--experts") + 1])
        active = 2 + (1 if "--shared-expert" in flags else 0)
        per_block = 4 * C * C + active * 3 * C * expert_width(flags) + C * experts
    return 2 * (LAYERS * per_block + C * VOCAB)


def parameters(flags):
    if "--experts" not in flags:
        per_block = 12 * C * C + 13 * C
    else:
        experts = int(flags[flags.index("--experts") + 1])
        count = experts + (1 if "--shared-expert" in flags else 0)
        per_block = 4 * C * C + 8 * C + experts * C + count * 3 * expert_width(flags) * C
    return (VOCAB + SEQ) * C + LAYERS * per_block + 2 * C + VOCAB * C


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def run(name, flags, seed, steps, out):
    metrics = os.path.join(out, f"{name}-s{seed}.jsonl")
    report = os.path.join(out, f"{name}-s{seed}.json")
    if not os.path.exists(metrics) or not os.path.exists(report):
        cmd = [PACI, "train", "-k", "1f1b", "-p", "1", "-m", "1", "-n", str(steps), "--seed",
               str(seed), "--val-every", str(max(1, steps // 8)), "--metrics", metrics + ".part",
               "--report", report + ".part", "--quiet", *flags]
        print(f"moe_train: {name} seed {seed} ({steps} steps)", file=sys.stderr, flush=True)
        if subprocess.run(cmd).returncode != 0:
            sys.exit(f"moe_train: failed: {' '.join(cmd)}")
        os.replace(report + ".part", report)
        os.replace(metrics + ".part", metrics)
    with open(report) as f:
        load = [b["max_over_mean"] for b in json.load(f).get("expert_load", [])]
    lines = read_jsonl(metrics)
    val = [(l["step"], l["val_loss"]) for l in lines if "val_loss" in l]
    train = [l for l in lines if "loss" in l]
    rates = [l["tokens_per_s"] for l in train[1:]]
    return {"val": val, "final_val": val[-1][1], "final_train": train[-1]["loss"],
            "tokens_per_s": statistics.median(rates), "expert_load": load}


def machine(blas):
    """Cores, CPU model and the BLAS kernel a run used (its metrics' or report's "blas")."""
    cpu = "unknown CPU"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return (f"{os.cpu_count()} cores, {cpu}, {blas['library']} with its {blas['kernel']} kernel "
            f"({blas['cpu']})")


def spread(values):
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(ROOT, "out", "moe_train"))
    ap.add_argument("--results", default=os.path.join(ROOT, "docs", "results"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    results = {"steps": args.steps, "tokens_per_step": BATCH * SEQ, "models": []}
    for seed in range(1, args.seeds + 1):  # seeds interleaved across the models
        for name, flags, _ in MODELS:
            run(name, flags, seed, args.steps, args.out)
    results["machine"] = machine(
        read_jsonl(os.path.join(args.out, f"{MODELS[0][0]}-s1.jsonl"))[0]["blas"])
    for name, flags, text in MODELS:
        runs = [run(name, flags, s, args.steps, args.out) for s in range(1, args.seeds + 1)]
        results["models"].append({
            "name": name, "flags": flags, "description": text,
            "parameters": parameters(flags), "forward_flops_per_token": flops_per_token(flags),
            "final_val_loss": spread([r["final_val"] for r in runs]),
            "tokens_per_s": spread([r["tokens_per_s"] for r in runs]),
            "expert_load": (spread([x for r in runs for x in r["expert_load"]])
                            if runs[0]["expert_load"] else None),
            "val_curves": [r["val"] for r in runs]})
    os.makedirs(args.results, exist_ok=True)
    with open(os.path.join(args.results, "moe_train.json"), "w") as f:
        json.dump(results, f, indent=1)
        f.write("\n")
    write_markdown(results, os.path.join(args.results, "moe_train.md"), args)
    plot(results, os.path.join(args.results, "moe_train.svg"))


def load_text(m):
    load = m.get("expert_load")
    if not load:
        return "-"
    return f"{load['median']:.2f} [{load['min']:.2f}, {load['max']:.2f}]"


def write_markdown(results, path, args):
    dense = next(m for m in results["models"] if m["name"] == "dense")
    rows = []
    for m in results["models"]:
        v, t = m["final_val_loss"], m["tokens_per_s"]
        rows.append(f"| {m['description']} | {m['parameters'] / 1e6:.2f} M | "
                    f"{m['forward_flops_per_token'] / dense['forward_flops_per_token']:.3f} | "
                    f"{v['median']:.4f} [{v['min']:.4f}, {v['max']:.4f}] | "
                    f"{v['median'] - dense['final_val_loss']['median']:+.4f} | "
                    f"{t['median']:,.0f} [{t['min']:,.0f}, {t['max']:,.0f}] | {load_text(m)} |")
    tokens = results["steps"] * results["tokens_per_step"]
    excess = max(m["forward_flops_per_token"] / dense["forward_flops_per_token"] - 1
                 for m in results["models"])
    text = f"""# The mixture-of-experts GPT against the dense one on KJV

`bash scripts/experiments/moe_train.sh` — paci's default GPT (4 blocks, C = 128, T = 128, B = 16,
byte vocabulary) and the same model with 8 SwiGLU experts in every block, top-2 routing, dropless,
the load-balancing loss at 0.01, with and without a shared expert; the expert width is paci's
default, which gives each token the dense MLP's FLOPs. {results['steps']} steps of one micro-batch
({tokens / 1e6:.2f} M tokens), the same learning-rate schedule, data order and seeds
1..{args.seeds} for every model, trained by `paci train -k 1f1b -p 1` on this machine
({results['machine']}). Validation loss: cross-entropy in nats per byte on
data/kjv_val.bin, min / median / max over the seeds; tokens/s: the median step of each run, min /
median / max over the runs; the expert load: each block's busiest expert over the mean over the
whole run (the report's `expert_load`), median [min, max] over every block of every seed.

| model | parameters | forward FLOPs a token (dense = 1) | final validation loss | against dense (median; negative: lower) | tokens/s | busiest expert's load over the mean |
|---|---|---|---|---|---|---|
{chr(10).join(rows)}

![validation loss](moe_train.svg)

The FLOPs are the matmuls' (model/config.cpp's formula): the router and the rounding of the expert
width make the MoE models' at most {excess:.1%} more than the dense one's. On a CPU the experts' GEMMs are smaller
and the tokens are gathered and scattered, so the MoE models run slower per token than their FLOPs
say; on GPUs that cost is what `paci plan` models (docs/results/moe.md).
"""
    with open(path, "w") as f:
        f.write(text)


def plot(results, path):
    fig, ax = plots.figure()
    for m in results["models"]:
        for i, curve in enumerate(m["val_curves"]):
            xs = [step * results["tokens_per_step"] / 1e6 for step, _ in curve]
            ax.plot(xs, [v for _, v in curve], color=COLORS[m["name"]], alpha=0.8,
                    label=m["description"] if i == 0 else None)
    plots.tokens_axis(ax)
    ax.set_ylabel("validation loss (nats per byte)")
    ax.legend()
    plots.save(fig, path)


if __name__ == "__main__":
    main()
