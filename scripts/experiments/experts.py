#!/usr/bin/env python3
"""paci plan's default search against the configurations experts trained with.

For each expert configuration (a row of scripts/experiments/published_runs.json: Meta's Llama 3
405B, Megatron-LM's GPT-3 175B / 530B / 1T, NVIDIA's NeMo recipes), paci predicts the expert's
own configuration (as published.py does) and then searches the same model, GPUs, global batch
and precision with every other knob left open, at staleness 0 (the experts ran flushed
schedules). Writes docs/results/experts.md and experts.json: the measured step, paci's
prediction of the expert's configuration, paci's pick, its predicted step and the predicted gain
(expert's predicted step / pick's), and whether each fits paci's memory limit.

    python3 scripts/experiments/experts.py [--paci build/cli/paci] [--out docs/results] [--jobs N]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from published import model_flags, plan_command  # noqa: E402  (the expert's own configuration)

EXPERTS = [
    ("llama3_405B_8k_8192gpu", "Meta, Llama 3 405B pre-training (Table 4)"),
    ("llama3_405B_8k_16384gpu", "Meta, Llama 3 405B pre-training (Table 4)"),
    ("korthikanti22_175B_selective_sp", "Megatron-LM GPT-3 175B (Korthikanti et al.)"),
    ("korthikanti22_530B_selective_sp", "Megatron-LM 530B (Korthikanti et al.)"),
    ("korthikanti22_1T_selective_sp", "Megatron-LM 1T (Korthikanti et al.)"),
    ("megatron_h100_177B", "Megatron-LM README, 177B on H100"),
    ("megatron_h100_462B", "Megatron-LM README, 462B on H100"),
    ("nemo2407_gpt3_175b_h100_fp8_512", "NeMo 24.07 recipe, GPT-3 175B FP8"),
    ("nemo2407_llama3_70b_h100_fp8_cp2_64", "NeMo 24.07 recipe, Llama 3 70B FP8, CP 2"),
    ("nemo2502_llama31_405b_b200_fp8_cp2_128", "NeMo 25.02 recipe, Llama 3.1 405B FP8 on B200"),
    ("nemo2504_llama3_70b_gb200_fp8_fsdp_64", "NeMo 25.04 recipe, Llama 3 70B FP8 FSDP on GB200"),
    ("mb2602_dsv3_b200_mxfp8_256", "Megatron-Bridge 26.02 recipe, DeepSeek-V3 MXFP8 on B200"),
    ("mb2602_dsv3_gb200_mxfp8_256", "Megatron-Bridge 26.02 recipe, DeepSeek-V3 MXFP8 on GB200"),
]


def search_command(paci, run, json_path, jobs):
    # The numeric formats the run chose (GEMMs, gradients, moments, FP8 weights) stay fixed.
    return [paci, "plan", "--quiet", "--json", json_path, "--jobs", str(jobs), *model_flags(run["model"]),
            *(["--cluster", os.path.join(ROOT, run["cluster_file"])] if run.get("cluster_file")
              else ["--gpu", run["gpu"]]), "--gpus", str(run["gpus"]),
            "--global-batch", str(run["global_batch"]), "--max-staleness", "0",
            "--precision", run.get("precision", "bf16"),
            "--grad-dtype", run.get("grad_dtype", "fp32"),
            "--moments-dtype", run.get("moments_dtype", "fp32"),
            *(["--fp8-param-gather"] if run.get("fp8_param_gather") else []),
            "--attention", run["attention"]]


def label(p):
    parts = [p["kind"], f"t={p['tp']}"]
    if p["cp"] > 1:
        parts.append(f"c={p['cp']}")
    parts += [f"p={p['pp']}", f"d={p['dp']}"]
    if p.get("ep", 1) > 1:
        parts.append(f"e={p['ep']}")
    if p["kind"] == "interleaved":
        parts.append(f"v={p['chunks']}")
    parts += [f"b={p['microbatch_size']}", f"recompute {p['recompute']}", f"z{p['zero']}"]
    if p["sequence_parallel"]:
        parts.append("sp")
    return " ".join(parts)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--paci", default=os.path.join(ROOT, "build", "cli", "paci"))
    ap.add_argument("--runs", default=os.path.join(HERE, "published_runs.json"))
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "results"))
    ap.add_argument("--jobs", type=int, default=0, help="search threads (0: every core)")
    args = ap.parse_args()
    runs = {r["id"]: r for r in json.load(open(args.runs))}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (rid, who) in enumerate(EXPERTS):
            run = runs[rid]
            print(f"experts: {i + 1}/{len(EXPERTS)} {rid}", file=sys.stderr, flush=True)
            fixed_json, search_json = os.path.join(tmp, "f.json"), os.path.join(tmp, "s.json")
            p = subprocess.run(plan_command(args.paci, run, fixed_json), capture_output=True,
                               text=True)
            if p.returncode != 0:
                sys.exit(f"experts: {rid}: paci plan (the expert's) failed: {p.stderr.strip()}")
            expert = json.load(open(fixed_json))["plans"][0]
            start = time.monotonic()
            cmd = search_command(args.paci, run, search_json, args.jobs)
            p = subprocess.run(cmd, capture_output=True, text=True)
            seconds = time.monotonic() - start
            if p.returncode != 0:
                sys.exit(f"experts: {rid}: paci plan (the search) failed: {p.stderr.strip()}")
            pick = json.load(open(search_json))["plans"][0]
            rows.append({"id": rid, "who": who, "gpu": run["gpu"], "gpus": run["gpus"],
                         "precision": run.get("precision", "bf16"),
                         "measured_step_s": run["measured_step_s"],
                         "expert": label(expert), "expert_step_s": expert["step_s"],
                         "expert_fits": expert["fits"],
                         "expert_peak_gib": expert["peak_memory_bytes"] / 2**30,
                         "pick": label(pick), "pick_step_s": pick["step_s"],
                         "pick_peak_gib": pick["peak_memory_bytes"] / 2**30,
                         "gain": expert["step_s"] / pick["step_s"], "search_s": seconds,
                         "search_command": " ".join(cmd[1:]).replace(search_json, "R.json")})
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "experts.json"), "w") as f:
        json.dump(rows, f, indent=1)
        f.write("\n")
    at_least = sum(r["gain"] >= 1 - 1e-9 for r in rows)
    md = ["# paci plan against the experts' configurations", "",
          "`python3 scripts/experiments/experts.py` (after `bash scripts/build.sh`): for each "
          "configuration an expert team trained with, paci's prediction of it, and what paci's "
          "default search (every knob open but the model, GPUs, global batch and the numeric "
          "formats the run chose: the GEMMs', the gradients', the Adam moments', FP8 weights; "
          "staleness 0, as they ran) picks for the same run. Gain = paci's predicted step of the "
          "expert's configuration / of its pick, both in paci's model; the measured step is the "
          "source's (docs/results/published.md). Fits: against the GPU's memory less paci's 4 GiB "
          "reserve; an expert configuration paci says does not fit ran, so there paci's memory "
          "model is too large.", "",
          f"**The search's pick is at least as fast as the expert's, in paci's model, in {at_least} "
          f"of {len(rows)}; {sum(r['expert_fits'] for r in rows)} of the {len(rows)} expert "
          f"configurations fit paci's memory limit.**", "",
          "| run | GPUs | measured step (s) | expert's configuration | paci predicts (s) | fits (peak GiB) | paci's pick | predicts (s) | peak GiB | gain | search (s) |",
          "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        md.append(f"| {r['id']} ({r['who']}) | {r['gpu']} x {r['gpus']}, {r['precision']} | "
                  f"{r['measured_step_s']:.2f} | {r['expert']} | {r['expert_step_s']:.2f} | "
                  f"{'yes' if r['expert_fits'] else 'no'} ({r['expert_peak_gib']:.1f}) | "
                  f"{r['pick']} | {r['pick_step_s']:.2f} | {r['pick_peak_gib']:.1f} | "
                  f"{r['gain']:.2f}x | {r['search_s']:.1f} |")
    md.append("")
    with open(os.path.join(args.out, "experts.md"), "w") as f:
        f.write("\n".join(md))
    print(md[4], file=sys.stderr)


if __name__ == "__main__":
    main()
