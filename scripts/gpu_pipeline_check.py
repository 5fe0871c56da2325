#!/usr/bin/env python3
"""Checks one GPU pipeline run for scripts/gpu_check.sh: the versions its report recorded equal the
static analysis exactly (`paci analyze --json`), its peak activations equal the analysed ones,
and its per-step losses are within `--rtol` of the CPU backend's run of the same file.

usage: gpu_pipeline_check.py GPU_REPORT ANALYSIS CPU_REPORT --rtol R
Prints one line; exits 1 when a check fails."""
import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gpu_report")
    ap.add_argument("analysis")
    ap.add_argument("cpu_report")
    ap.add_argument("--rtol", type=float, required=True)
    a = ap.parse_args()
    gpu, want, cpu = (json.load(open(p)) for p in (a.gpu_report, a.analysis, a.cpu_report))
    key = lambda v: (v["stage"], v["mb"])
    got_versions = {key(v): (v["v_f"], v["v_b"]) for v in gpu["versions"]}
    want_versions = {key(v): (v["v_f"], v["v_b"]) for v in want["versions"]}
    problems = []
    if got_versions != want_versions:
        bad = [k for k in want_versions if got_versions.get(k) != want_versions[k]]
        problems.append(f"{len(bad)} versions differ from the analysis (first: stage {bad[0][0]} "
                        f"mb {bad[0][1]})" if bad else "version records differ in count")
    for g, w in zip(gpu["stages"], want["stages"]):
        if g["peak_activations"] != w["peak_activations"]:
            problems.append(f"stage {g['stage']}: peak activations {g['peak_activations']}, "
                            f"analysed {w['peak_activations']}")
    worst = float("inf")
    if not gpu["loss"] or len(gpu["loss"]) != len(cpu["loss"]):
        problems.append(f"{len(gpu['loss'])} step losses, the CPU run has {len(cpu['loss'])}")
    elif any(g is None or c is None for g, c in zip(gpu["loss"], cpu["loss"])):
        problems.append("a step loss is not a number")
    else:
        worst = max(abs(g - c) / max(abs(c), 1e-12) for g, c in zip(gpu["loss"], cpu["loss"]))
        if worst > a.rtol:
            problems.append(f"losses differ from the CPU run by up to {worst:.2e} (rtol {a.rtol})")
    mstale = [s["max_staleness"] for s in gpu["stages"]]
    line = (f"{gpu['schedule']['kind']} P={gpu['schedule']['stages']}: {len(got_versions)} "
            f"versions, max staleness {mstale}, worst loss difference vs CPU {worst:.2e}, "
            f"{gpu['throughput']['tokens_per_s']:.0f} tokens/s, bubble "
            f"{100 * gpu['bubble_ratio']:.1f}%")
    print(line + ("" if not problems else " -- FAIL: " + "; ".join(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
