#!/usr/bin/env python3
"""The convergence study (issue 7): the default GPT on the default corpus (KJV) trained with every
schedule at P=4 and M in {P/2, P-1, 2P}, the same token budget, seeds and hyperparameters (the
peak learning rate scaled with the square root of the batch, as the PACI paper does), and the
time each schedule needs to reach a target loss in the paper's setting (GPT-2 Medium on 8 stages)
from the simulator.

Writes docs/results/convergence.json, convergence.md and loss-vs-tokens SVGs. Run it through
scripts/experiments/convergence.sh, which builds paci and prepares the data first.

Every number comes from a paci run made by this script; nothing is typed in by hand.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACI = os.path.join(ROOT, "build", "cli", "paci")
TOKENS_PER_MICROBATCH = 16 * 128  # the default shape: B=16 sequences of T=128 bytes


def paci(*args, capture=False):
    cmd = [PACI, *map(str, args)]
    result = subprocess.run(cmd, stdout=subprocess.PIPE if capture else None, text=True)
    if result.returncode != 0:
        sys.exit(f"convergence: failed: {' '.join(cmd)}")
    return result.stdout


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def configurations(stages, quick):
    ms = sorted({max(1, stages // 2), stages - 1, 2 * stages})
    runs = []
    for m in ms:
        # GPipe computes exactly what 1F1B computes (same accumulation order: the executor's tests
        # check it bitwise), so one M is enough to show it; the study compares their losses.
        for kind in ("1f1b", "gpipe", "paci") if m == ms[0] else ("1f1b", "paci"):
            runs.append((kind, m))
        if m >= stages:
            runs.append(("2bw", m))
    runs.append(("pipedream", 1))  # no accumulation: an update after every micro-batch
    if quick:
        runs = [r for r in runs if r[0] in ("1f1b", "paci")] + [("pipedream", 1)]
    return runs


def train(kind, stages, m, seed, tokens, lr_ref, m_ref, outdir, threads):
    steps = max(2, tokens // (m * TOKENS_PER_MICROBATCH))
    lr = lr_ref * math.sqrt(m / m_ref)  # square-root scaling with the batch, as the paper
    name = f"{kind}_P{stages}_M{m}_seed{seed}"
    metrics = os.path.join(outdir, name + ".jsonl")
    report = os.path.join(outdir, name + ".report.json")
    if not (os.path.exists(metrics) and os.path.exists(report)):
        start = time.time()
        paci("train", "--kind", kind, "--stages", stages, "--microbatches", m, "--steps", steps,
             "--lr", f"{lr:.6g}", "--seed", seed, "--val-every", max(1, steps // 12),
             "--val-microbatches", 32, "--sequential", "--threads", threads, "--quiet",
             "--metrics", metrics, "--report", report)
        print(f"  {name}: {steps} steps, lr {lr:.3g}, {time.time() - start:.0f} s", flush=True)
    lines = read_jsonl(metrics)
    with open(report) as f:
        rep = json.load(f)
    train_curve = [(l["tokens"], l["loss"]) for l in lines if "loss" in l]
    val_curve = [(l["step"] * m * TOKENS_PER_MICROBATCH, l["val_loss"]) for l in lines
                 if "val_loss" in l]
    tail = [loss for _, loss in train_curve[-max(1, len(train_curve) // 20):]]
    return {
        "kind": kind, "stages": stages, "microbatches": m, "seed": seed,
        "tokens": steps * m * TOKENS_PER_MICROBATCH, "steps": steps, "lr": lr,
        "final_train_loss": sum(tail) / len(tail),
        "final_val_loss": val_curve[-1][1],
        "max_staleness": [st["max_staleness"] for st in rep["stages"]],
        "wall_s": rep["wall_s"],
        "train_curve": train_curve, "val_curve": val_curve,
    }


def tokens_to(curve, target):
    """First point where the validation curve reaches target (linear interpolation)."""
    for i, (tok, loss) in enumerate(curve):
        if loss <= target:
            if i == 0:
                return tok
            t0, l0 = curve[i - 1]
            return t0 + (tok - t0) * (l0 - target) / (l0 - loss)
    return None


def paper_seconds_per_token(outdir, flops, bandwidth):
    """Simulated time per token of every schedule at P=8, M=8 with GPT-2 Medium's cost model."""
    cost = os.path.join(outdir, "gpt2-medium-8.cost.json")
    paci("costmodel", "--preset", "gpt2-medium", "--stages", 8, "--flops", flops,
         "--mem-bandwidth", bandwidth, "-o", cost)
    rows = json.loads(paci("compare", "--stages", 8, "--microbatches", 8, "--steps", 64, "--cost",
                           cost, "-f", "json", capture=True))
    with open(cost) as f:
        tokens_per_mb = json.load(f)["tokens_per_microbatch"]
    return {r["kind"]: 1.0 / (r["microbatches_per_s"] * tokens_per_mb) for r in rows["rows"]}, rows


def svg(runs, m, path):
    """Loss versus tokens: training loss (thin) and validation loss (thick) per schedule."""
    colors = {"1f1b": "#1f77b4", "gpipe": "#17becf", "paci": "#d62728", "2bw": "#2ca02c",
              "pipedream": "#9467bd"}
    sel = [r for r in runs if r["microbatches"] == m or r["kind"] == "pipedream"]
    xs = [t for r in sel for t, _ in r["train_curve"]]
    ys = [l for r in sel for _, l in r["train_curve"] + r["val_curve"]]
    if not xs:
        return
    x0, x1, y0, y1 = 0, max(xs), min(ys), min(max(ys), 4.0)
    w, h, pad = 720, 420, 60
    X = lambda x: pad + (w - 2 * pad) * (x - x0) / (x1 - x0)
    Y = lambda y: h - pad - (h - 2 * pad) * (min(y, y1) - y0) / (y1 - y0)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{w/2}" y="20" text-anchor="middle" font-size="14">loss vs tokens, P=4, '
           f'M={m} (pipedream: M=1)</text>']
    for i in range(6):
        y = y0 + (y1 - y0) * i / 5
        out.append(f'<line x1="{pad}" x2="{w-pad}" y1="{Y(y):.1f}" y2="{Y(y):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{pad-6}" y="{Y(y)+4:.1f}" text-anchor="end">{y:.2f}</text>')
        x = x0 + (x1 - x0) * i / 5
        out.append(f'<text x="{X(x):.1f}" y="{h-pad+16}" text-anchor="middle">{x/1e6:.1f}M</text>')
    out.append(f'<text x="{w/2}" y="{h-12}" text-anchor="middle">tokens</text>')
    for k, r in enumerate(sel):
        c = colors.get(r["kind"], "black")
        pts = " ".join(f"{X(t):.1f},{Y(l):.1f}" for t, l in r["train_curve"])
        out.append(f'<polyline fill="none" stroke="{c}" stroke-opacity="0.35" points="{pts}"/>')
        pts = " ".join(f"{X(t):.1f},{Y(l):.1f}" for t, l in r["val_curve"])
        out.append(f'<polyline fill="none" stroke="{c}" stroke-width="2.5" points="{pts}"/>')
        out.append(f'<text x="{w-pad-110}" y="{pad+16*k}" fill="{c}">{r["kind"]} '
                   f'(val {r["final_val_loss"]:.3f})</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: tiny budget, fewer runs")
    ap.add_argument("--stages", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=None, help="token budget per run")
    ap.add_argument("--seeds", default="1", help="comma-separated seeds")
    ap.add_argument("--lr", type=float, default=2e-3, help="peak LR at --lr-microbatches")
    ap.add_argument("--lr-microbatches", type=int, default=2)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--flops", default="4e14", help="sustained FLOP/s of the paper-setting GPU")
    ap.add_argument("--mem-bandwidth", default="4.8e12", help="its memory bandwidth, B/s")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "results"))
    args = ap.parse_args()
    tokens = args.tokens or (120_000 if args.quick else 2_000_000)
    runs_dir = os.path.join(ROOT, "out", "convergence" + ("-quick" if args.quick else ""))
    os.makedirs(runs_dir, exist_ok=True)
    os.makedirs(args.out, exist_ok=True)
    seeds = [int(s) for s in args.seeds.split(",")]

    runs = []
    for seed in seeds:
        for kind, m in configurations(args.stages, args.quick):
            runs.append(train(kind, args.stages, m, seed, tokens, args.lr, args.lr_microbatches,
                              runs_dir, args.threads))

    per_token, paper = paper_seconds_per_token(runs_dir, args.flops, args.mem_bandwidth)
    groups = sorted({r["microbatches"] for r in runs if r["kind"] != "pipedream"})
    for m in groups:
        group = [r for r in runs if r["microbatches"] == m or r["kind"] == "pipedream"]
        target = max(r["final_val_loss"] for r in group)  # every run of the group reaches it
        for r in group:
            if r["kind"] == "pipedream" and "tokens_to_target" in r:
                continue
            tt = tokens_to(r["val_curve"], target)
            r.setdefault("targets", {})[str(m)] = {
                "target_val_loss": target, "tokens_to_target": tt,
                "paper_setting_hours": None if tt is None else tt * per_token[r["kind"]] / 3600}

    summary = {"setting": {"model": "4 layers, 4 heads, d_model 128, seq 128, batch 16, bytes",
                           "corpus": "King James Bible (Debian bible-kjv), 95/5 split",
                           "stages": args.stages, "seeds": seeds, "tokens_per_run": tokens,
                           "lr": f"{args.lr} at M={args.lr_microbatches}, scaled by sqrt(M/"
                                 f"{args.lr_microbatches})",
                           "paper_setting": {"cost_model": "paci costmodel --preset gpt2-medium "
                                             f"--stages 8 --flops {args.flops} --mem-bandwidth "
                                             f"{args.mem_bandwidth}", "compare": paper}},
               "runs": [{k: v for k, v in r.items() if k not in ("train_curve", "val_curve")}
                        for r in runs],
               "curves": [{"kind": r["kind"], "microbatches": r["microbatches"], "seed": r["seed"],
                           "val": r["val_curve"]} for r in runs]}
    # GPipe and 1F1B accumulate the same micro-batches in the same order: identical losses.
    same = {}
    for m in groups:
        f = [r for r in runs if r["kind"] == "1f1b" and r["microbatches"] == m]
        g = [r for r in runs if r["kind"] == "gpipe" and r["microbatches"] == m]
        if f and g:
            same[str(m)] = (f[0]["train_curve"] == g[0]["train_curve"] and
                            f[0]["val_curve"] == g[0]["val_curve"])
    summary["gpipe_equals_1f1b_bitwise"] = same
    with open(os.path.join(args.out, "convergence.json"), "w") as f:
        json.dump(summary, f, indent=1)
    for m in groups:
        svg(runs, m, os.path.join(args.out, f"convergence_M{m}.svg"))

    md = ["| M | schedule | tokens | final train loss | final val loss | val perplexity | "
          "max staleness per stage | tokens to target | time to target, paper setting (s) | "
          "vs best flush |", "|---|---|---|---|---|---|---|---|---|---|"]
    for m in groups:
        group = [r for r in runs if r["microbatches"] == m or r["kind"] == "pipedream"]
        flush = [r["targets"][str(m)]["paper_setting_hours"] for r in group
                 if r["kind"] in ("1f1b", "gpipe") and r["targets"][str(m)]["paper_setting_hours"]]
        best_flush = min(flush) if flush else None
        for kind in ("1f1b", "gpipe", "pipedream", "2bw", "paci"):
            sel = [r for r in group if r["kind"] == kind]
            if not sel:
                continue
            mean = lambda key: sum(r[key] for r in sel) / len(sel)
            spread = max(r["final_val_loss"] for r in sel) - min(r["final_val_loss"] for r in sel)
            t = sel[0]["targets"][str(m)]
            hours = t["paper_setting_hours"]
            tt = "-" if t["tokens_to_target"] is None else f"{t['tokens_to_target']:,.0f}"
            hh = "-" if hours is None else f"{hours * 3600:.3g}"
            vs = "-" if hours is None or not best_flush else f"{best_flush / hours:.2f}x"
            val = f"{mean('final_val_loss'):.4f}" + (f" ± {spread / 2:.4f}" if len(sel) > 1 else "")
            label = kind + (" (M=1)" if kind == "pipedream" else "")
            md.append(f"| {m} | {label} | {sel[0]['tokens']:,} | {mean('final_train_loss'):.4f} "
                      f"| {val} | {math.exp(mean('final_val_loss')):.3f} | "
                      f"{sel[0]['max_staleness']} | {tt} | {hh} | {vs} |")
    md += ["", "Target loss of an M group: the highest final validation loss in the group, so every "
           "run reaches it; tokens to target by linear interpolation between validation points; "
           "time to target = tokens × the simulator's time per token for that schedule at P=8, "
           "M=8, GPT-2 Medium (`paper_setting` in convergence.json). PipeDream (M=1) is listed in "
           "every group against that group's target."]
    for m, ok in same.items():
        md.append(f"GPipe and 1F1B at M={m}: per-step training and validation losses "
                  f"{'identical (bitwise)' if ok else 'DIFFER'}.")
    with open(os.path.join(args.out, "convergence.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))

    # The headline for the README: PACI against 1F1B-flush at each M.
    head = ["| M | 1f1b val loss | paci val loss | difference | paci max staleness | "
            "paci speed-up to the target over 1f1b (paper setting, simulated) |", "|---|---|---|---|---|---|"]
    for m in groups:
        f = [r for r in runs if r["kind"] == "1f1b" and r["microbatches"] == m]
        p = [r for r in runs if r["kind"] == "paci" and r["microbatches"] == m]
        if not f or not p:
            continue
        fv = sum(r["final_val_loss"] for r in f) / len(f)
        pv = sum(r["final_val_loss"] for r in p) / len(p)
        fh = f[0]["targets"][str(m)]["paper_setting_hours"]
        ph = p[0]["targets"][str(m)]["paper_setting_hours"]
        speed = "-" if not fh or not ph else f"{fh / ph:.2f}x"
        head.append(f"| {m} | {fv:.4f} | {pv:.4f} | {100 * (pv / fv - 1):+.2f}% | "
                    f"{max(p[0]['max_staleness'])} | {speed} |")
    with open(os.path.join(args.out, "convergence_headline.md"), "w") as f:
        f.write("\n".join(head) + "\n")


if __name__ == "__main__":
    main()
