#!/usr/bin/env python3
"""Issue 4's convergence gate: the default small GPT (4 layers, 4 heads, d_model 128, seq 128,
micro-batch 16, bytes) on the KJV corpus, one device, 3,000 steps. Writes docs/results/gate.md and
gate.svg from the run's metrics (out/gate/metrics.jsonl). Run via scripts/experiments/gate.sh."""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
metrics, command, wall = sys.argv[1], sys.argv[2], sys.argv[3]
lines = [json.loads(l) for l in open(metrics) if l.strip()]
train = [(l["tokens"], l["loss"], l["elapsed_s"]) for l in lines if "loss" in l]
val = [(l["step"], l["val_loss"]) for l in lines if "val_loss" in l]
tokens_per_step = train[0][0]
elapsed = {int(round(t / tokens_per_step)): e for t, _, e in train}
first_ok = next(((s, v) for s, v in val if v <= 1.65), None)

w, h, pad = 640, 360, 55
x1 = train[-1][0]
y0, y1 = 1.0, 3.5
X = lambda x: pad + (w - 2 * pad) * x / x1
Y = lambda y: h - pad - (h - 2 * pad) * (min(max(y, y0), y1) - y0) / (y1 - y0)
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" '
       f'font-size="12"><rect width="{w}" height="{h}" fill="white"/>',
       f'<text x="{w/2}" y="20" text-anchor="middle" font-size="14">default GPT on KJV: loss vs '
       f'tokens (one device)</text>']
for i in range(6):
    y = y0 + (y1 - y0) * i / 5
    svg.append(f'<line x1="{pad}" x2="{w-pad}" y1="{Y(y):.1f}" y2="{Y(y):.1f}" stroke="#ddd"/>'
               f'<text x="{pad-6}" y="{Y(y)+4:.1f}" text-anchor="end">{y:.1f}</text>'
               f'<text x="{X(x1*i/5):.1f}" y="{h-pad+16}" text-anchor="middle">'
               f'{x1*i/5/1e6:.1f}M</text>')
svg.append(f'<line x1="{pad}" x2="{w-pad}" y1="{Y(1.65):.1f}" y2="{Y(1.65):.1f}" stroke="#999" '
           f'stroke-dasharray="4"/><text x="{w-pad}" y="{Y(1.65)-4:.1f}" text-anchor="end">'
           f'gate 1.65</text>')
pts = " ".join(f"{X(t):.1f},{Y(l):.1f}" for t, l, _ in train[::5])
svg.append(f'<polyline fill="none" stroke="#1f77b4" stroke-opacity="0.5" points="{pts}"/>')
pts = " ".join(f"{X(s*tokens_per_step):.1f},{Y(v):.1f}" for s, v in val)
svg.append(f'<polyline fill="none" stroke="#d62728" stroke-width="2.5" points="{pts}"/>'
           f'<text x="{w-pad}" y="{pad}" text-anchor="end" fill="#1f77b4">train loss</text>'
           f'<text x="{w-pad}" y="{pad+16}" text-anchor="end" fill="#d62728">validation loss</text>'
           f'<text x="{w/2}" y="{h-12}" text-anchor="middle">tokens</text></svg>')
out = os.path.join(ROOT, "docs", "results")
os.makedirs(out, exist_ok=True)
open(os.path.join(out, "gate.svg"), "w").write("\n".join(svg) + "\n")
md = ["# Convergence gate (issue 4)", "",
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
