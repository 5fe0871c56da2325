#!/usr/bin/env python3
"""The convergence gate: the default small GPT (4 layers, 4 heads, d_model 128, seq 128,
micro-batch 16, bytes) on the KJV corpus, one device, 3,000 steps. Writes docs/results/gate.md,
gate.svg (matplotlib) and gate_curves.json (the plotted curves) from the run's metrics
(out/gate/metrics.jsonl). Run via scripts/experiments/gate.sh;
`gate.py --plot-only docs/results/gate_curves.json` (or the metrics file) redraws gate.svg alone."""
import argparse
import json
import os
import sys

import plots

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GATE = 1.65  # target validation loss, nats/byte


def plot(train, val, path):
    """gate.svg: training loss (thin) and validation loss (thick) against tokens, the gate as a
    dashed line. train, val: [(tokens, loss), ...]."""
    fig, ax = plots.figure(6.4, 3.6)
    plots.loss_curve(ax, train, "#1f77b4", "train", label="train loss", alpha=0.5)
    plots.loss_curve(ax, val, "#d62728", "val", label="validation loss")
    ax.axhline(GATE, color="#999999", linestyle="--", linewidth=1.2,
               label=f"gate: validation loss ≤ {GATE}")
    ax.set_ylim(1.0, 3.5)
    ax.set_xlim(0, max(t for t, _ in train + val))
    plots.tokens_axis(ax)
    ax.set_ylabel("loss (nats/byte)")
    ax.set_title("default GPT on KJV: loss vs tokens (one device)")
    ax.legend(loc="upper right")
    plots.save(fig, path)


def plot_only(path, out):
    """Redraws gate.svg from the curves a gate run saved (gate_curves.json) or from its metrics
    (a .jsonl file)."""
    try:
        with open(path) as f:
            if path.endswith(".jsonl"):
                lines = [json.loads(l) for l in f if l.strip()]
                train, val = curves(lines)[:2]
            else:
                saved = json.load(f)
                train, val = saved["train"], saved["val"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        sys.exit(f"gate.py: cannot re-plot from {path}: {e}")
    if not train or not val:
        sys.exit(f"gate.py: {path} has no training or no validation losses")
    plot(train, val, os.path.join(out, "gate.svg"))
    print(f"wrote {os.path.join(out, 'gate.svg')}")


def curves(lines):
    """The metrics' training curve (every 5th step), validation curve, both [(tokens, loss)], and
    the full [(tokens, loss, elapsed_s)] training record."""
    record = [(l["tokens"], l["loss"], l["elapsed_s"]) for l in lines if "loss" in l]
    if not record:
        return [], [], []
    tokens_per_step = record[0][0]
    val = [(l["step"] * tokens_per_step, l["val_loss"]) for l in lines if "val_loss" in l]
    return [(t, round(l, 5)) for t, l, _ in record[::5]], val, record


ap = argparse.ArgumentParser(description="Writes gate.md, gate.svg, gate_curves.json and "
                                         "gate_headline.md from the gate run's metrics.")
ap.add_argument("metrics", help="the run's metrics (out/gate/metrics.jsonl); with --plot-only, "
                                "that or the gate_curves.json a run saved")
ap.add_argument("command", nargs="?", help="the paci command line, for gate.md")
ap.add_argument("wall", nargs="?", help="its wall-clock time, for gate.md")
ap.add_argument("--plot-only", action="store_true", help="redraw gate.svg only")
ap.add_argument("--out", default=os.path.join(ROOT, "docs", "results"),
                help="where the files go (default docs/results)")
args = ap.parse_args()
out = args.out
os.makedirs(out, exist_ok=True)
if args.plot_only:
    plot_only(args.metrics, out)
    sys.exit(0)
if args.command is None or args.wall is None:
    ap.error("COMMAND and WALL are required unless --plot-only")
try:
    with open(args.metrics) as f:
        lines = [json.loads(l) for l in f if l.strip()]
except (OSError, ValueError) as e:
    sys.exit(f"gate.py: cannot read {args.metrics}: {e}")
train_curve, val_curve, train = curves(lines)
val = [(l["step"], l["val_loss"]) for l in lines if "val_loss" in l]
if not train or not val:
    sys.exit(f"gate.py: {args.metrics} has no training or no validation losses")
tokens_per_step = train[0][0]
elapsed = {int(round(t / tokens_per_step)): e for t, _, e in train}
first_ok = next(((s, v) for s, v in val if v <= GATE), None)

# The plotted curves are kept next to the plot, so --plot-only can redraw it without the run.
with open(os.path.join(out, "gate_curves.json"), "w") as f:
    json.dump({"train": train_curve, "val": val_curve}, f)
    f.write("\n")
plot(train_curve, val_curve, os.path.join(out, "gate.svg"))
command, wall = args.command, args.wall
md = ["# Convergence gate", "",
      f"Command: `{command}` — {wall} of wall-clock on the 2-core development machine.", "",
      "Target: validation loss ≤ 1.65 nats/byte within 15 minutes (a uniform byte model is 5.55).",
      "", "| step | tokens | elapsed | validation loss |", "|---|---|---|---|"]
for s, v in val:
    md.append(f"| {s} | {s*tokens_per_step:,.0f} | {elapsed.get(s, 0):.0f} s | {v:.4f} |")
md += ["", f"Final training loss (mean of the last 100 steps): "
       f"{sum(l for _, l, _ in train[-100:]) / 100:.4f}.",
       (f"The gate is first met at step {first_ok[0]} ({elapsed.get(first_ok[0], 0):.0f} s), "
        f"validation loss {first_ok[1]:.4f}." if first_ok else "The gate was NOT met."),
       "", "The validation split is the last 5% of the Bible (Colossians to Revelation), a "
       "different register from most of the training text, which is why it sits above the "
       "training loss.", "", "![loss curve](gate.svg)", ""]
open(os.path.join(out, "gate.md"), "w").write("\n".join(md))
final_elapsed = train[-1][2]
headline = (f"the default GPT reaches validation loss {first_ok[1]:.2f} nats/byte (gate: ≤ 1.65; a "
            f"uniform byte model is 5.55) after {first_ok[0]:,} steps, "
            f"{elapsed.get(first_ok[0], 0):.0f} s of training on one device, and {val[-1][1]:.3f} "
            f"after {val[-1][0]:,} steps ({final_elapsed / 60:.1f} min)" if first_ok else
            f"the gate was NOT met: validation loss {val[-1][1]:.3f} after {val[-1][0]:,} steps")
open(os.path.join(out, "gate_headline.md"), "w").write(headline + "\n")
print("\n".join(md))
