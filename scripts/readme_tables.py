#!/usr/bin/env python3
"""Fills the README's generated blocks from what the commands wrote: docs/results/fidelity.md,
docs/results/convergence.md, and live output of the paci binary (compare, analyze, validate).
Run after the experiments: python3 scripts/readme_tables.py (keeps README.md.in as the template)."""
import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACI = os.path.join(ROOT, "build", "cli", "paci")


def run(cmd, stdin=None):
    r = subprocess.run(cmd, shell=True, cwd=ROOT, capture_output=True, text=True, input=stdin,
                       env={**os.environ, "PATH": os.path.dirname(PACI) + ":" + os.environ["PATH"]})
    return r.stdout + r.stderr


def read(path, default):
    p = os.path.join(ROOT, path)
    return open(p).read().strip() if os.path.exists(p) else default


template = read("docs/README.md.in", None)
if template is None:
    raise SystemExit("docs/README.md.in is missing")
rows = []
for n in (8, 32, 128, 512):
    j = json.loads(run(f"paci compare -p 8 -m 8 -n {n} --kinds 1f1b,paci -f json"))
    f = next(r for r in j["rows"] if r["kind"] == "1f1b")
    p = next(r for r in j["rows"] if r["kind"] == "paci")
    rows.append(f"| {n} | {f['makespan_s']:g} | {p['makespan_s']:g} | {p['speedup_vs_1f1b']:.3f}× |")
blocks = {
    "FIDELITY_TABLE_P2": read("docs/results/fidelity_P2.md", "(run scripts/experiments/fidelity.sh)"),
    "FIDELITY_TABLE_P4": read("docs/results/fidelity_P4.md", "(run scripts/experiments/fidelity.sh)"),
    "FIDELITY_HEADLINE": read("docs/results/fidelity_headline.md", ""),
    "BLAS_ROW": read("docs/results/blas_kernel_headline.md", "(run bench/blas_kernel.sh)"),
    "CONVERGENCE_TABLE": read("docs/results/convergence_headline.md",
                              "(run scripts/experiments/convergence.sh)"),
    "CONVERGENCE_FINDINGS": read("docs/results/convergence_findings.md",
                                 "(run scripts/experiments/convergence.sh)"),
    "CONVERGENCE_P8_TABLE": read("docs/results/p8/convergence_headline.md",
                                 "(not run yet: see the command above)"),
    "CONVERGENCE_P8_FINDINGS": read("docs/results/p8/convergence_findings.md", ""),
    "PAPER_LR_P8_TABLE": read("docs/results/p8-paper-lr/convergence_headline.md",
                              "(not run yet: see the command above)"),
    "PAPER_LR_P8_FINDINGS": read("docs/results/p8-paper-lr/convergence_findings.md", ""),
    "COMPARE_8_8_8": run("paci compare --stages 8 --microbatches 8 --steps 8 --tf 1 --tb 2").rstrip(),
    "STEPS_TABLE": "\n".join(rows),
    "ZERO_BUBBLE_TABLE": read("docs/results/zero_bubble.md",
                              "(run scripts/experiments/zero_bubble.sh)"),
    "GATE_LINE": read("docs/results/gate_headline.md", "(run scripts/experiments/gate.sh)"),
    "ANALYZE_OUTPUT": run("paci schedule --kind paci --stages 8 --microbatches 4 --steps 4 | "
                          "paci analyze -"),
    "DEADLOCK_OUTPUT": run("paci validate -", "0F0 0B0 0F1 0B1 0U\n1F1 1B1 1F0 1B0 1U\n"),
}
for key, value in blocks.items():
    template = template.replace(key, value)
open(os.path.join(ROOT, "README.md"), "w").write(template + "\n")
print("README.md regenerated")
