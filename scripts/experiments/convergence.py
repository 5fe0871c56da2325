#!/usr/bin/env python3
"""The convergence study: the default GPT on the default corpus (KJV) trained with every
schedule at P=4 and M in {P/2, P-1, 2P}, the same token budget, seeds and hyperparameters (the
peak learning rate scaled with the square root of the batch, as the PACI paper does), and the
time each schedule needs to reach a target loss in the paper's setting (GPT-2 Medium on 8 stages)
from the simulator.

Writes docs/results/convergence.json, convergence.md and loss-vs-tokens SVGs (matplotlib). Run it
through scripts/experiments/convergence.sh, which builds paci and prepares the data first;
`convergence.py --plot-only [--out DIR]` redraws the SVGs from DIR/convergence.json alone.

Every number comes from a paci run made by this script; nothing is typed in by hand.
"""
import argparse
import concurrent.futures
import json
import math
import os
import subprocess
import sys
import time

import plots

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACI = os.environ.get("PACI_BIN") or os.path.join(ROOT, "build", "cli", "paci")
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


def configurations(stages, quick, first_seed, ms=None):
    """(kind, M) runs of one seed, at ms (default P/2, P-1 and 2P). GPipe computes exactly what 1F1B computes (same accumulation
    order: the executor's tests check it bitwise), so it runs at one M and for the first seed only,
    to show it; 2BW and PipeDream run for the first seed only."""
    ms = sorted(set(ms or [max(1, stages // 2), stages - 1, 2 * stages]))
    runs = []
    for m in ms:
        runs += [("1f1b", m), ("paci", m)]
        if first_seed and m == ms[0]:
            runs.append(("gpipe", m))
        if first_seed and m >= stages:
            runs.append(("2bw", m))
    if first_seed:
        runs.append(("pipedream", 1))  # no accumulation: an update after every micro-batch
    if quick:
        runs = [r for r in runs if r[0] in ("1f1b", "paci", "pipedream")]
    return runs


LAYERS = 4  # transformer blocks of the trained GPT (--layers)


def train(kind, stages, m, seed, tokens, lr_ref, m_ref, warmup, outdir, threads):
    steps = max(2, tokens // (m * TOKENS_PER_MICROBATCH))
    lr = lr_ref * math.sqrt(m / m_ref)  # square-root scaling with the batch, as the paper
    warmup_steps = max(1, round(warmup * steps))
    depth = "" if LAYERS == 4 else f"_L{LAYERS}"
    name = f"{kind}_P{stages}{depth}_M{m}_N{steps}_seed{seed}_lr{lr:.3g}"
    metrics = os.path.join(outdir, name + ".jsonl")
    report = os.path.join(outdir, name + ".report.json")
    if not (os.path.exists(metrics) and os.path.exists(report)):
        start = time.time()
        if kind == "paci-stash":  # PACI's order with PipeDream's weight stashing: delay only
            path = os.path.join(outdir, f"{name}.schedule.json")
            paci("schedule", "--kind", "paci", "--stages", stages, "--microbatches", m,
                 "--steps", steps, "-o", path)
            with open(path) as f:
                sched = json.load(f)
            sched["weight_policy"] = "stash"
            with open(path, "w") as f:
                json.dump(sched, f)
            what = ["--schedule", path]
        else:
            what = ["--kind", kind, "--stages", stages, "--microbatches", m, "--steps", steps]
        paci("train", *what, "--layers", LAYERS,
             "--lr", f"{lr:.6g}", "--warmup-steps", warmup_steps, "--seed", seed,
             "--val-every", max(1, steps // 12), "--val-microbatches", 32, "--sequential",
             "--threads", threads, "--quiet", "--metrics", metrics, "--report", report)
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
        "warmup_steps": warmup_steps,
        "final_train_loss": sum(tail) / len(tail),
        "final_val_loss": val_curve[-1][1],
        "max_staleness": [st["max_staleness"] for st in rep["stages"]],
        "wall_s": rep["wall_s"],
        "train_curve": train_curve, "val_curve": val_curve,
    }


def mean_curve(runs, key):
    """Point-wise mean of the runs' curves (same schedule, so the same x points)."""
    curves = [r[key] for r in runs]
    n = min(len(c) for c in curves)
    return [(curves[0][i][0], sum(c[i][1] for c in curves) / len(curves)) for i in range(n)]


def tokens_to(curve, target):
    """First point where the validation curve reaches target (linear interpolation)."""
    for i, (tok, loss) in enumerate(curve):
        if loss <= target:
            if i == 0:
                return tok
            t0, l0 = curve[i - 1]
            return t0 + (tok - t0) * (l0 - target) / (l0 - loss)
    return None


def paper_seconds_per_token(outdir, flops, bandwidth, stages, m):
    """Simulated time per token of every schedule at the study's P and this M, with GPT-2
    Medium's cost model on the paper's kind of GPU (P=8, M=8 is the paper's own setting)."""
    cost = os.path.join(outdir, f"gpt2-medium-{stages}.cost.json")
    paci("costmodel", "--preset", "gpt2-medium", "--stages", stages, "--flops", flops,
         "--mem-bandwidth", bandwidth, "-o", cost)
    rows = json.loads(paci("compare", "--stages", stages, "--microbatches", m, "--steps", 64,
                           "--cost", cost, "-f", "json", capture=True))
    with open(cost) as f:
        tokens_per_mb = json.load(f)["tokens_per_microbatch"]
    return {r["kind"]: 1.0 / (r["microbatches_per_s"] * tokens_per_mb) for r in rows["rows"]}, rows


def against_best_flush(series, per_token):
    """Time-to-accuracy as the paper reports it: for PACI at each M, the target is PACI's own
    final validation loss; every flush configuration (1F1B or GPipe, any M) is timed to it on its
    mean validation curve, and the fastest is the baseline. A flush run that never gets there
    within the budget counts as its whole budget, so the speed-up is then a lower bound."""
    flush = [a for a in series if a["kind"] in ("1f1b", "gpipe")]
    rows = []
    for p in sorted((a for a in series if a["kind"] == "paci"), key=lambda a: a["microbatches"]):
        m = p["microbatches"]
        target = p["final_val_loss"]
        paci_s = tokens_to(p["val_curve"], target) * per_token[m]["paci"]
        best = None
        for f in flush:
            tt = tokens_to(f["val_curve"], target)
            reached = tt is not None
            tokens = tt if reached else f["val_curve"][-1][0]
            secs = tokens * per_token[f["microbatches"]][f["kind"]]
            if best is None or (reached, -secs) > (best["reached"], -best["seconds"]):
                best = {"kind": f["kind"], "microbatches": f["microbatches"], "seconds": secs,
                        "reached": reached}
        if best is None:
            continue
        rows.append({"paci_microbatches": m, "target_val_loss": target, "paci_seconds": paci_s,
                     "best_flush": best, "speedup": best["seconds"] / paci_s,
                     "lower_bound": not best["reached"]})
    return rows


KIND_ORDER = ("1f1b", "gpipe", "pipedream", "2bw", "paci", "paci-stash")


def plot_group(series, m, path, stages):
    """Loss versus tokens at one M: per schedule, training loss (thin, faint) and validation loss
    (thick), each the mean over seeds. series: convergence.json's "schedules" entries; a missing
    "train_curve" (files written before the curves were saved) draws the validation loss only."""
    sel = [a for a in series if a["microbatches"] == m or a["kind"] == "pipedream"]
    sel.sort(key=lambda a: (KIND_ORDER.index(a["kind"]) if a["kind"] in KIND_ORDER
                            else len(KIND_ORDER), a["kind"]))
    ys = [l for a in sel for _, l in a.get("train_curve", []) + a["val_curve"]]
    if not ys:
        return False
    fig, ax = plots.figure()
    for a in sel:
        c = plots.color(a["kind"])
        plots.loss_curve(ax, a.get("train_curve"), c, "train")
        name = a["kind"] + (" (M=1)" if a["kind"] == "pipedream" else "")
        plots.loss_curve(ax, a["val_curve"], c, "val",
                         label=f"{name}: final val {a['final_val_loss']:.3f}")
    handles, _ = ax.get_legend_handles_labels()
    if any(a.get("train_curve") for a in sel):  # explain thin against thick
        handles += plots.line_style_handles()
    ax.legend(handles=handles, loc="upper right")
    y0, y1 = min(ys), min(max(ys), 4.0)
    margin = 0.02 * (y1 - y0)
    ax.set_ylim(y0 - margin, y1 + margin)
    ax.set_xlim(left=0)
    plots.tokens_axis(ax)
    ax.set_ylabel("loss (nats/byte)")
    ax.set_title(f"loss vs tokens, P={stages}, M={m} (pipedream: M=1), mean over seeds")
    plots.save(fig, path)
    return True


def plot_all(series, stages, out):
    """convergence_M{m}.svg for every M of the grid (PipeDream, at M=1, is drawn in each)."""
    groups = sorted({a["microbatches"] for a in series if a["kind"] != "pipedream"})
    written = []
    for m in groups:
        path = os.path.join(out, f"convergence_M{m}.svg")
        if plot_group(series, m, path, stages):
            written.append(path)
    return written


def plot_only(out):
    """Re-plots convergence_M*.svg from out/convergence.json, without training anything."""
    path = os.path.join(out, "convergence.json")
    try:
        with open(path) as f:
            summary = json.load(f)
        series, stages = summary["schedules"], summary["setting"]["stages"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        sys.exit(f"convergence.py: cannot re-plot from {path}: {e}")
    if not all(a.get("train_curve") for a in series):
        print(f"convergence.py: warning: {path} has no training-loss curves (written before "
              "they were saved); the plots show the validation loss only", file=sys.stderr)
    for p in plot_all(series, stages, out):
        print(f"wrote {p}")


def aggregate(runs):
    """One entry per (kind, M): mean and spread over seeds, mean curves."""
    series = []
    for key in sorted({(r["kind"], r["microbatches"]) for r in runs}):
        sel = [r for r in runs if (r["kind"], r["microbatches"]) == key]
        vals = [r["final_val_loss"] for r in sel]
        series.append({
            "kind": key[0], "microbatches": key[1], "seeds": [r["seed"] for r in sel],
            "tokens": sel[0]["tokens"], "lr": sel[0]["lr"],
            "final_train_loss": sum(r["final_train_loss"] for r in sel) / len(sel),
            "final_val_loss": sum(vals) / len(vals),
            "val_spread": (max(vals) - min(vals)) / 2,
            "max_staleness": sel[0]["max_staleness"],
            "train_curve": mean_curve(sel, "train_curve"),
            "val_curve": mean_curve(sel, "val_curve")})
    return series


def lr_sweep(args, tokens, runs_dir, threads):
    """1F1B and PACI at M = P/2 for every --lr-sweep value (seed: the first): how PACI's gap
    depends on the learning rate."""
    m = max(1, args.stages // 2)
    seed = int(args.seeds.split(",")[0])
    rows = []
    for lr in [float(x) for x in args.lr_sweep.split(",") if x]:
        pair = {k: train(k, args.stages, m, seed, tokens, lr, m, args.warmup, runs_dir, threads)
                for k in ("1f1b", "paci")}
        rows.append({"lr": lr, "microbatches": m, "seed": seed,
                     "1f1b_val_loss": pair["1f1b"]["final_val_loss"],
                     "paci_val_loss": pair["paci"]["final_val_loss"]})
    return rows


def best_flush_phrase(row):
    """'1.52x (1f1b at M=16)' or '≥ 1.52x (no flush run reaches it; 1f1b at M=16's budget)'."""
    b = row["best_flush"]
    if row["lower_bound"]:
        return (f"≥ {row['speedup']:.2f}x (no flush run reaches it; {b['kind']} at "
                f"M={b['microbatches']} over its whole budget)")
    return f"{row['speedup']:.2f}x ({b['kind']} at M={b['microbatches']})"


def findings(series, groups, sweep, longer, mechanism, stages, per_token, best_flush):
    """The README's sentences about the study, every number taken from this run's results."""
    def get(kind, m):
        return next((a for a in series if a["kind"] == kind and a["microbatches"] == m), None)
    gaps = []
    for m in sorted(groups, reverse=True):
        f, p = get("1f1b", m), get("paci", m)
        if f and p:
            gaps.append(f"{100 * (p['final_val_loss'] / f['final_val_loss'] - 1):+.2f}% at M={m} "
                        f"(max staleness {max(p['max_staleness'])})")
    seeds = max((len(a["seeds"]) for a in series), default=1)
    out = [f"At the same token budget, PACI's final validation loss against 1F1B's: "
           f"{', '.join(gaps)} — means over {seeds} seed(s)."]
    if best_flush:
        parts = [f"{best_flush_phrase(r)} at M={r['paci_microbatches']} (target "
                 f"{r['target_val_loss']:.4f}; simulated per-token speed-up over 1F1B at that M: "
                 f"{per_token[r['paci_microbatches']]['1f1b'] / per_token[r['paci_microbatches']]['paci']:.2f}x)"
                 for r in best_flush]
        out.append(f"Time to PACI's own final validation loss against the fastest flush "
                   f"configuration (1F1B or GPipe at any M of this study), each timed by the "
                   f"simulator with GPT-2 Medium on P={stages} GPUs: PACI is {'; '.join(parts)}.")
    if sweep:
        parts = [f"{100 * (r['paci_val_loss'] / r['1f1b_val_loss'] - 1):+.1f}% at {r['lr']:.3g}"
                 for r in sweep]
        out.append(f"The gap grows with the peak learning rate (M={sweep[0]['microbatches']}, "
                   f"seed {sweep[0]['seed']}): {', '.join(parts)}; 1F1B's own loss falls from "
                   f"{sweep[0]['1f1b_val_loss']:.4f} to {sweep[-1]['1f1b_val_loss']:.4f} over "
                   f"the same range while PACI's stays between "
                   f"{min(r['paci_val_loss'] for r in sweep):.4f} and "
                   f"{max(r['paci_val_loss'] for r in sweep):.4f}.")
    if mechanism:
        out.append(f"With weight stashing in PACI's order (the same delay, no mixed-version "
                   f"gradient) the loss is {mechanism['paci_stash_val_loss']:.4f} against PACI's "
                   f"{mechanism['paci_val_loss']:.4f} and 1F1B's {mechanism['1f1b_val_loss']:.4f} "
                   f"(M={mechanism['microbatches']}, peak LR {mechanism['lr']:.3g}, seed "
                   f"{mechanism['seed']}).")
    if len(longer) == 2:
        a, b = longer
        d = lambda r: 100 * (r["paci_val_loss"] / r["1f1b_val_loss"] - 1)
        out.append(f"Training longer at M={a['microbatches']} (seed {a['seed']}): "
                   f"{d(a):+.2f}% after {a['tokens']:,} tokens ({a['steps']} steps), "
                   f"{d(b):+.2f}% after {b['tokens']:,} tokens ({b['steps']} steps).")
    return " ".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: tiny budget, fewer runs")
    ap.add_argument("--stages", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=None, help="token budget per run")
    ap.add_argument("--seeds", default=None, help="comma-separated seeds (default 1,2; quick: 1)")
    ap.add_argument("--lr", type=float, default=3e-4, help="peak LR at --lr-microbatches")
    ap.add_argument("--lr-microbatches", type=int, default=2)
    ap.add_argument("--microbatches", default=None,
                    help="comma-separated M of the main grid (default P/2,P-1,2P)")
    ap.add_argument("--warmup", type=float, default=0.1, help="warm-up, a fraction of the steps")
    ap.add_argument("--lr-sweep", default=None,
                    help="peak LRs for 1f1b and paci at M=P/2 (default 3e-4,5e-4,1e-3,2e-3; "
                         "quick: none)")
    ap.add_argument("--long-tokens", type=int, default=None,
                    help="also 1f1b and paci at M=P/2 with this budget (default 6,000,000; "
                         "quick: none)")
    ap.add_argument("--layers", type=int, default=4, help="transformer blocks of the GPT")
    ap.add_argument("--kinds", default="1f1b,gpipe,pipedream,2bw,paci,paci-stash",
                    help="schedules to train (comma list; paci-stash: the weight-stashing "
                         "control at M=P/2)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                    help="compute threads in all")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                    help="trainings at once (each gets threads/jobs threads)")
    ap.add_argument("--flops", default="4e14", help="sustained FLOP/s of the paper-setting GPU")
    ap.add_argument("--mem-bandwidth", default="4.8e12", help="its memory bandwidth, B/s")
    ap.add_argument("--out", default=None,
                    help="where the tables and plots go (default docs/results; quick: "
                         "out/convergence-quick)")
    ap.add_argument("--plot-only", action="store_true",
                    help="train nothing: redraw convergence_M*.svg in --out from the "
                         "convergence.json there")
    args = ap.parse_args()
    args.out = args.out or (os.path.join(ROOT, "out", "convergence-quick") if args.quick
                            else os.path.join(ROOT, "docs", "results"))
    if args.plot_only:
        plot_only(args.out)
        return
    tokens = args.tokens or (120_000 if args.quick else 2_000_000)
    args.seeds = args.seeds or ("1" if args.quick else "1,2")
    global LAYERS
    LAYERS = args.layers
    kinds = set(args.kinds.split(","))
    if args.long_tokens is None:
        args.long_tokens = 0 if args.quick else 6_000_000
    if args.lr_sweep is None:
        args.lr_sweep = "" if args.quick else "3e-4,5e-4,1e-3,2e-3"
    runs_dir = os.path.join(ROOT, "out", "convergence" + ("-quick" if args.quick else ""))
    os.makedirs(runs_dir, exist_ok=True)
    os.makedirs(args.out, exist_ok=True)
    seeds = [int(s) for s in args.seeds.split(",")]
    ms = [int(m) for m in args.microbatches.split(",")] if args.microbatches else None
    if ms and min(ms) < 1:
        sys.exit("convergence.py: --microbatches must be positive")

    # Every training, run --jobs at a time (results do not depend on threads or concurrency).
    grid = [(kind, m, seed) for i, seed in enumerate(seeds)
            for kind, m in configurations(args.stages, args.quick, i == 0, ms) if kind in kinds]
    todo = [(kind, m, seed, args.lr, args.lr_microbatches, tokens) for kind, m, seed in grid]
    m_half = max(1, args.stages // 2)
    todo += [(kind, m_half, seeds[0], float(lr), m_half, tokens)
             for lr in args.lr_sweep.split(",") if lr for kind in ("1f1b", "paci")]
    if args.long_tokens:
        todo += [(kind, m_half, seeds[0], args.lr, args.lr_microbatches, args.long_tokens)
                 for kind in ("1f1b", "paci")]
    if not args.quick and "paci-stash" in kinds:
        todo.append(("paci-stash", m_half, seeds[0], args.lr, args.lr_microbatches, tokens))
    threads = max(1, args.threads // args.jobs)
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        list(pool.map(lambda r: train(r[0], args.stages, r[1], r[2], r[5], r[3], r[4],
                                      args.warmup, runs_dir, threads), todo))
    runs = [train(kind, args.stages, m, seed, tokens, args.lr, args.lr_microbatches, args.warmup,
                  runs_dir, threads) for kind, m, seed in grid]
    sweep = lr_sweep(args, tokens, runs_dir, threads)
    # Delay or mixed versions? PACI's order with weight stashing (every backward reads the weights
    # its forward read) keeps the delay and removes the mixed-version gradient.
    mechanism = {}
    if not args.quick and "paci-stash" in kinds:
        stash = train("paci-stash", args.stages, m_half, seeds[0], tokens, args.lr,
                      args.lr_microbatches, args.warmup, runs_dir, threads)
        pick = lambda k: next(r for r in runs if r["kind"] == k and r["microbatches"] == m_half
                              and r["seed"] == seeds[0])
        mechanism = {"microbatches": m_half, "seed": seeds[0], "lr": stash["lr"],
                     "1f1b_val_loss": pick("1f1b")["final_val_loss"],
                     "paci_val_loss": pick("paci")["final_val_loss"],
                     "paci_stash_val_loss": stash["final_val_loss"]}
    # Does PACI's gap at M = P/2 close with a longer training? The same LR rule, 3x the tokens.
    longer = []
    if args.long_tokens:
        pair = {k: train(k, args.stages, m_half, seeds[0], args.long_tokens, args.lr,
                         args.lr_microbatches, args.warmup, runs_dir, threads)
                for k in ("1f1b", "paci")}
        short = {k: next(r for r in runs if r["kind"] == k and r["microbatches"] == m_half and
                         r["seed"] == seeds[0]) for k in ("1f1b", "paci")}
        for budget, runs_ in ((tokens, short), (args.long_tokens, pair)):
            longer.append({"microbatches": m_half, "seed": seeds[0], "tokens": budget,
                           "steps": runs_["1f1b"]["steps"],
                           "1f1b_val_loss": runs_["1f1b"]["final_val_loss"],
                           "paci_val_loss": runs_["paci"]["final_val_loss"]})
    series = aggregate(runs)

    groups = sorted({a["microbatches"] for a in series if a["kind"] != "pipedream"})
    per_token, paper = {}, {}
    for m in sorted(set(groups) | {a["microbatches"] for a in series}):
        per_token[m], paper[m] = paper_seconds_per_token(runs_dir, args.flops, args.mem_bandwidth,
                                                         args.stages, m)
    vs_best = against_best_flush(series, per_token)
    for m in groups:
        group = [a for a in series if a["microbatches"] == m or a["kind"] == "pipedream"]
        target = max(a["final_val_loss"] for a in group)  # every mean curve reaches it
        for a in group:
            tt = tokens_to(a["val_curve"], target)
            a.setdefault("targets", {})[str(m)] = {
                "target_val_loss": target, "tokens_to_target": tt,
                "paper_setting_hours": None if tt is None else
                tt * per_token[a["microbatches"]][a["kind"]] / 3600}

    summary = {"setting": {"model": f"{args.layers} layers, 4 heads, d_model 128, seq 128, "
                                    "batch 16, bytes",
                           "corpus": "King James Bible (Debian bible-kjv), 95/5 split",
                           "stages": args.stages, "seeds": seeds, "tokens_per_run": tokens,
                           "lr": f"{args.lr} at M={args.lr_microbatches}, scaled by sqrt(M/"
                                 f"{args.lr_microbatches})",
                           "warmup": f"{args.warmup:.0%} of the steps, then cosine to lr/10",
                           "paper_setting": {"cost_model": "paci costmodel --preset gpt2-medium "
                                             f"--stages {args.stages} --flops {args.flops} "
                                             f"--mem-bandwidth {args.mem_bandwidth}",
                                             "compare_per_microbatches": {str(k): v for k, v
                                                                          in paper.items()}}},
               "runs": [{k: v for k, v in r.items() if k not in ("train_curve", "val_curve")}
                        for r in runs],
               # The mean training curves ride along (loss rounded to 5 decimals), so the plots
               # can be redrawn from this file alone (--plot-only).
               "schedules": [{**a, "train_curve": [[t, round(l, 5)] for t, l in a["train_curve"]]}
                             for a in series],
               "lr_sweep": sweep, "longer_training": longer, "delay_vs_mixed": mechanism,
               "paci_vs_best_flush": vs_best}
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
    plot_all(summary["schedules"], args.stages, args.out)

    md = ["| M | schedule | seeds | tokens | peak LR | final train loss | final val loss | "
          "val perplexity | max staleness per stage | tokens to target | time to target, paper "
          "setting (s) | vs best flush |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for m in groups:
        group = [a for a in series if a["microbatches"] == m or a["kind"] == "pipedream"]
        flush = [a["targets"][str(m)]["paper_setting_hours"] for a in group
                 if a["kind"] in ("1f1b", "gpipe") and a["targets"][str(m)]["paper_setting_hours"]]
        best_flush = min(flush) if flush else None
        for kind in ("1f1b", "gpipe", "pipedream", "2bw", "paci"):
            for a in [a for a in group if a["kind"] == kind]:
                t = a["targets"][str(m)]
                hours = t["paper_setting_hours"]
                tt = "-" if t["tokens_to_target"] is None else f"{t['tokens_to_target']:,.0f}"
                hh = "-" if hours is None else f"{hours * 3600:.3g}"
                vs = "-" if hours is None or not best_flush else f"{best_flush / hours:.2f}x"
                val = f"{a['final_val_loss']:.4f}" + (
                    f" ± {a['val_spread']:.4f}" if len(a["seeds"]) > 1 else "")
                label = kind + (" (M=1)" if kind == "pipedream" else "")
                md.append(f"| {m} | {label} | {len(a['seeds'])} | {a['tokens']:,} | "
                          f"{a['lr']:.3g} | {a['final_train_loss']:.4f} | {val} | "
                          f"{math.exp(a['final_val_loss']):.3f} | {a['max_staleness']} | {tt} | "
                          f"{hh} | {vs} |")
    md += ["", "Losses are means over the seeds (± half the spread between them). Target loss of "
           "an M group: the highest mean final validation loss in the group, so every schedule "
           "reaches it; tokens to target by linear interpolation on the mean validation curve; "
           f"time to target = tokens × the simulator's time per token for that schedule at "
           f"P={args.stages} and its M with GPT-2 Medium's cost model (`paper_setting` in "
           "convergence.json; P=8, M=8 is the paper's setting). PipeDream (M=1) is listed in "
           "every group against that group's target. Schedules run with fewer seeds (GPipe, "
           "2BW, PipeDream: the first only) are averaged over those seeds, so GPipe's row can "
           "differ from 1F1B's although every seed's losses are identical."]
    for m, ok in same.items():
        md.append(f"GPipe and 1F1B at M={m}: per-step training and validation losses "
                  f"{'identical (bitwise)' if ok else 'DIFFER'}.")
    if sweep:
        md += ["", f"Learning-rate sweep at M={sweep[0]['microbatches']} (seed "
               f"{sweep[0]['seed']}, same budget and warm-up):", "",
               "| peak LR | 1f1b val loss | paci val loss | paci vs 1f1b |", "|---|---|---|---|"]
        for row in sweep:
            d = 100 * (row["paci_val_loss"] / row["1f1b_val_loss"] - 1)
            md.append(f"| {row['lr']:.3g} | {row['1f1b_val_loss']:.4f} | "
                      f"{row['paci_val_loss']:.4f} | {d:+.2f}% |")
    if mechanism:
        md += ["", f"Delay or mixed versions (M={mechanism['microbatches']}, seed "
               f"{mechanism['seed']}, peak LR {mechanism['lr']:.3g}): 1f1b "
               f"{mechanism['1f1b_val_loss']:.4f}, paci {mechanism['paci_val_loss']:.4f}, paci "
               f"with weight stashing (same order and delay, every backward reads its forward's "
               f"weights) {mechanism['paci_stash_val_loss']:.4f}."]
    if longer:
        md += ["", f"Longer training at M={longer[0]['microbatches']} (seed {longer[0]['seed']}, "
               "same LR rule and warm-up fraction):", "",
               "| tokens | steps | 1f1b val loss | paci val loss | paci vs 1f1b |",
               "|---|---|---|---|---|"]
        for row in longer:
            d = 100 * (row["paci_val_loss"] / row["1f1b_val_loss"] - 1)
            md.append(f"| {row['tokens']:,} | {row['steps']} | {row['1f1b_val_loss']:.4f} | "
                      f"{row['paci_val_loss']:.4f} | {d:+.2f}% |")
    with open(os.path.join(args.out, "convergence.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))

    # The headline for the README: PACI against 1F1B-flush at each M.
    head = ["| M | 1f1b val loss | paci val loss | difference | paci max staleness | "
            "time to the group's target, paci vs 1f1b | time to paci's loss, paci vs the fastest "
            "flush configuration |", "|---|---|---|---|---|---|---|"]
    for m in groups:
        f = [a for a in series if a["kind"] == "1f1b" and a["microbatches"] == m]
        p = [a for a in series if a["kind"] == "paci" and a["microbatches"] == m]
        if not f or not p:
            continue
        f, p = f[0], p[0]
        fh = f["targets"][str(m)]["paper_setting_hours"]
        ph = p["targets"][str(m)]["paper_setting_hours"]
        speed = "-" if not fh or not ph else f"{fh / ph:.2f}x"
        row = next((r for r in vs_best if r["paci_microbatches"] == m), None)
        best = "-" if row is None else best_flush_phrase(row)
        pm = lambda a: f"{a['final_val_loss']:.4f}" + (
            f" ± {a['val_spread']:.4f}" if len(a["seeds"]) > 1 else "")
        head.append(f"| {m} | {pm(f)} | {pm(p)} | "
                    f"{100 * (p['final_val_loss'] / f['final_val_loss'] - 1):+.2f}% | "
                    f"{max(p['max_staleness'])} | {speed} | {best} |")
    with open(os.path.join(args.out, "convergence_headline.md"), "w") as f:
        f.write("\n".join(head) + "\n")
    with open(os.path.join(args.out, "convergence_findings.md"), "w") as f:
        f.write(findings(series, groups, sweep, longer, mechanism, args.stages, per_token,
                         vs_best) + "\n")


if __name__ == "__main__":
    main()
