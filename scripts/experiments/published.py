#!/usr/bin/env python3
"""paci plan against published, measured GPU training runs.

Reads scripts/experiments/published_runs.json (each run's configuration, its measured step time,
its source and every assumption made where the source is silent), predicts each run with
`paci plan`, and writes docs/results/published.md and docs/results/published.json: predicted
against measured step time (and peak memory where published), each row with its source, the
error per source, and the median and worst error over the rows that set no constant.

    python3 scripts/experiments/published.py [--paci build/cli/paci] [--out docs/results]
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


def model_flags(m):
    """The row's model as paci plan's shape flags."""
    return ["--arch", m["arch"], "--layers", str(m["layers"]), "--d-model", str(m["d_model"]),
            "--heads", str(m["heads"]), "--kv-heads", str(m["kv_heads"]), "--ffn", str(m["ffn"]),
            "--vocab", str(m["vocab"]), "--seq-len", str(m["seq_len"]),
            "--tied-embeddings", "yes" if m["tied_embeddings"] else "no",
            *(["--head-dim", str(m["head_dim"])] if m.get("head_dim") else []),
            *(["--experts", str(m["experts"]), "--top-k", str(m["top_k"])] if m.get("experts") else []),
            *[a for key, flag in (("shared_expert_ffn", "--shared-expert-ffn"),
                                  ("dense_layers", "--dense-layers"), ("dense_ffn", "--dense-ffn"),
                                  ("q_lora_rank", "--q-lora-rank"), ("kv_lora_rank", "--kv-lora-rank"),
                                  ("rope_head_dim", "--rope-head-dim"), ("mtp_layers", "--mtp-layers"),
                                  ("router", "--router"))
              if m.get(key) for a in (flag, str(m[key]))]]


def plan_command(paci, run, json_path):
    m = run["model"]
    cmd = [paci, "plan", "--quiet", "--json", json_path, *model_flags(m),
           *(["--cluster", os.path.join(ROOT, run["cluster_file"])] if run.get("cluster_file")
             else ["--gpu", run["gpu"]]), "--gpus", str(run["gpus"]), "--global-batch", str(run["global_batch"]),
           "--tp", str(run["tp"]), "--cp", str(run.get("cp", 1)), "--pp", str(run["pp"]), "--microbatch-size", str(run["microbatch_size"]),
           *(["--ep", str(run.get("ep", 1))] if m.get("experts") else []),
           "--kind", run["kind"], "--recompute", run["recompute"], "--attention", run["attention"]]
    if run["kind"] == "interleaved":
        cmd += ["--chunks", str(run["chunks"])]
    for switch in ("sequence_parallel", "tp_comm_overlap", "overlap_grad_reduce"):
        cmd += ["--" + switch.replace("_", "-"), "on" if run.get(switch) else "off"]
    cmd += ["--zero", str(zero_of(run)), "--precision", run.get("precision", "bf16"),
            "--grad-dtype", run.get("grad_dtype", "fp32")]
    if "overlap_p2p" in run:  # else what the kind's runtime does (paci plan's default)
        cmd += ["--overlap-p2p", "on" if run["overlap_p2p"] else "off"]
    if run.get("offload_layers"):
        cmd += ["--offload-layers", str(run["offload_layers"])]
    if run.get("fp8_param_gather"):
        cmd += ["--fp8-param-gather"]
    if run.get("moments_dtype", "fp32") != "fp32":
        cmd += ["--moments-dtype", run["moments_dtype"]]
    # The run's own split of the layers: as given, else as even as they allow (Megatron-LM's and
    # DeepSpeed's), the remainder on the middle stages, as paci's default partition puts it.
    cmd += ["--partition", ",".join(str(x) for x in (run.get("partition") or even_split(run)))]
    return cmd


def zero_of(run):
    """The ZeRO stage: given, else 1 with the distributed optimizer, else 0."""
    return run["zero"] if "zero" in run else (1 if run.get("distributed_optimizer") else 0)


def stacks_of(run):
    """What a row exercises beyond bf16 Megatron-style 3D parallelism: fp8 / mxfp8, cp (context
    parallelism), fsdp (ZeRO 2 or 3); 'bf16 3D' when none."""
    out = []
    if run.get("precision", "bf16") != "bf16":
        out.append(run["precision"])
    if run.get("cp", 1) > 1:
        out.append("cp")
    if zero_of(run) >= 2:
        out.append("fsdp")
    if run["model"].get("experts"):
        out.append("moe")
    return out or ["bf16 3D"]


def even_split(run):
    stages = run["pp"] * (run["chunks"] if run["kind"] == "interleaved" else 1)
    layers = run["model"]["layers"]
    split = [layers // stages] * stages
    rest = layers % stages
    for s in list(range(1, stages - 1)) + list(range(stages - 1, -1, -1)):
        if rest == 0:
            break
        split[s] += 1
        rest -= 1
    return split


def short_source(source):
    return source.split(",")[0] + " " + source.split(",")[1].split()[0] if "," in source else source


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--paci", default=os.path.join(ROOT, "build", "cli", "paci"))
    ap.add_argument("--runs", default=os.path.join(HERE, "published_runs.json"))
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "results"))
    args = ap.parse_args()
    runs = json.load(open(args.runs))
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for run in runs:
            path = os.path.join(tmp, run["id"] + ".json")
            cmd = plan_command(args.paci, run, path)
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0:
                sys.exit(f"published: {run['id']}: paci plan failed: {p.stderr.strip()}\n  {' '.join(cmd)}")
            plan = json.load(open(path))["plans"][0]
            predicted = plan["step_s"]
            measured = run["measured_step_s"]
            r = {"id": run["id"], "source": run["source"], "gpu": run["gpu"], "gpus": run["gpus"],
                 "tp": run["tp"], "pp": run["pp"], "dp": plan["dp"], "chunks": run["chunks"],
                 "microbatch_size": run["microbatch_size"], "microbatches": plan["microbatches"],
                 "kind": run["kind"], "recompute": run["recompute"], "attention": run["attention"],
                 "measured_step_s": measured, "predicted_step_s": predicted,
                 "error": predicted / measured - 1.0, "sets_constant": run.get("sets_constant", []),
                 "predicted_peak_memory_bytes": plan["peak_memory_bytes"], "fits": plan["fits"],
                 "mfu": plan["mfu"], "command": " ".join(cmd[1:]).replace(path, "R.json"),
                 "assumptions": run["assumptions"], "cp": run.get("cp", 1),
                 "zero": zero_of(run), "precision": run.get("precision", "bf16"),
                 "offload_layers": run.get("offload_layers", 0),
                 "fp8_param_gather": run.get("fp8_param_gather", False),
                 "moments_dtype": run.get("moments_dtype", "fp32"), "ep": run.get("ep", 1),
                 "stacks": stacks_of(run)}
            if "measured_memory_gb" in run:
                r["measured_memory_gb"] = run["measured_memory_gb"]
                r["memory_error"] = plan["peak_memory_bytes"] / 1e9 / run["measured_memory_gb"] - 1.0
            results.append(r)

    held_out = [r for r in results if not r["sets_constant"]]
    setting = [r for r in results if r["sets_constant"]]
    errs = [abs(r["error"]) for r in held_out]
    summary = {
        "rows": len(results), "held_out_rows": len(held_out), "setting_rows": len(setting),
        "sources": sorted({r["source"] for r in results}),
        "held_out_median_abs_error": statistics.median(errs) if errs else None,
        "held_out_worst_abs_error": max(errs) if errs else None,
        "held_out_within_25pct": sum(e <= 0.25 for e in errs),
        "held_out_signed_median_error": statistics.median(r["error"] for r in held_out) if held_out else None,
        "by_stack": {},
    }
    # Memory: the rows whose source measured a peak, and how many of the configurations that
    # trained fit paci's model of their GPU.
    mem = [r["memory_error"] for r in results if "memory_error" in r]
    summary["memory"] = {
        "measured_rows": len(mem),
        "median_abs_error": statistics.median(abs(e) for e in mem) if mem else None,
        "worst_abs_error": max(abs(e) for e in mem) if mem else None,
        "signed_median_error": statistics.median(mem) if mem else None,
        "fit": sum(bool(r["fits"]) for r in results),
        "not_fit": sorted(r["id"] for r in results if not r["fits"])}
    for stack in ("bf16 3D", "fp8", "mxfp8", "cp", "fsdp", "moe"):
        rs = [r for r in held_out if stack in r["stacks"]]
        if rs:
            summary["by_stack"][stack] = {
                "rows": len(rs), "median_abs_error": statistics.median(abs(r["error"]) for r in rs),
                "worst_abs_error": max(abs(r["error"]) for r in rs),
                "signed_median_error": statistics.median(r["error"] for r in rs)}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "published.json"), "w") as f:
        json.dump({"summary": summary, "rows": results}, f, indent=1)
        f.write("\n")

    md = ["# paci plan against published training runs", "",
          "`bash scripts/experiments/published.sh` — every row a measured GPU training run from its "
          "source, predicted by `paci plan` with the row's configuration (its command is in "
          "docs/results/published.json). The inputs, every assumption made where a source is "
          "silent, and how each measured step time was read or derived: "
          "scripts/experiments/published_runs.json. The GPU presets hold datasheet values and "
          "microbenchmark measurements only (docs/cluster.md); "
          + ("no row sets any constant: every row is held out." if not setting else
             f"{len(setting)} rows set constants (listed apart below); the others are held out."), ""]
    md.append(f"**Held-out rows: {len(held_out)} from {len({r['source'] for r in held_out})} sources; "
              f"median |error| {100 * summary['held_out_median_abs_error']:.1f}%, worst "
              f"{100 * summary['held_out_worst_abs_error']:.1f}%, "
              f"{summary['held_out_within_25pct']} of {len(held_out)} within 25%; median signed error "
              f"{100 * summary['held_out_signed_median_error']:+.1f}% (positive: paci predicts slower).**")
    md.append("")
    m = summary["memory"]
    if m["measured_rows"]:
        md.append(f"**Memory: {m['fit']} of {len(results)} configurations, each of which trained on "
                  f"its GPUs, fit paci's model of them (not: {', '.join(m['not_fit']) or 'none'}); "
                  f"on the {m['measured_rows']} rows whose source measured a peak, median |error| "
                  f"{100 * m['median_abs_error']:.1f}%, worst {100 * m['worst_abs_error']:.1f}%, "
                  f"median signed {100 * m['signed_median_error']:+.1f}%.**")
        md.append("")
    md.append("| source | rows | GPU | pipeline stages | median abs error | worst abs error | median signed error |")
    md.append("|---|---|---|---|---|---|---|")
    for source in summary["sources"]:
        rs = [r for r in held_out if r["source"] == source]
        if not rs:
            continue
        e = [abs(r["error"]) for r in rs]
        md.append(f"| {source} | {len(rs)} | {', '.join(sorted({r['gpu'] for r in rs}))} | "
                  f"{min(r['pp'] for r in rs)}-{max(r['pp'] for r in rs)} | {100 * statistics.median(e):.1f}% | "
                  f"{100 * max(e):.1f}% | {100 * statistics.median(r['error'] for r in rs):+.1f}% |")
    md.append("")
    md.append("Where the misses point: [published_findings.md](published_findings.md).")
    md.append("")
    md.append("By stack (a row counts under each it exercises):")
    md.append("")
    md.append("| stack | rows | median abs error | worst abs error | median signed error |")
    md.append("|---|---|---|---|---|")
    for stack, b in summary["by_stack"].items():
        md.append(f"| {stack} | {b['rows']} | {100 * b['median_abs_error']:.1f}% | "
                  f"{100 * b['worst_abs_error']:.1f}% | {100 * b['signed_median_error']:+.1f}% |")
    md.append("")
    for title, group in (("Held-out rows", held_out), ("Rows that set a constant", setting)):
        if not group:
            continue
        md += [f"## {title}", "",
               "| run | GPU x n | t / c / p / d / v | b x M | schedule | recompute, ZeRO, precision | measured step (s) | predicted (s) | error | peak memory predicted (measured) |",
               "|---|---|---|---|---|---|---|---|---|---|"]
        for r in group:
            mem = f"{r['predicted_peak_memory_bytes'] / 1e9:.1f} GB"
            if "measured_memory_gb" in r:
                mem += f" ({r['measured_memory_gb']:.0f} GB, {100 * r['memory_error']:+.0f}%)"
            if not r["fits"]:
                mem += ", does not fit"
            md.append(f"| {r['id']} | {r['gpu']} x {r['gpus']} | {r['tp']} / {r['cp']} / {r['pp']} / {r['dp']} / {r['chunks']} | "
                      f"{r['microbatch_size']} x {r['microbatches']} | {r['kind']} | {r['recompute']}, z{r['zero']}, {r['precision']}"
                      f"{'' if r['attention'] == 'flash' else ', unfused'}"
                      f"{', offload ' + str(r['offload_layers']) if r.get('offload_layers') else ''}"
                      f"{', fp8 weights' if r.get('fp8_param_gather') else ''}"
                      f"{', bf16 moments' if r.get('moments_dtype', 'fp32') != 'fp32' else ''} | "
                      f"{r['measured_step_s']:.3f} | {r['predicted_step_s']:.3f} | {100 * r['error']:+.1f}% | {mem} |")
        md.append("")
    md += ["## Sources", ""]
    for source in summary["sources"]:
        md.append(f"- {source}")
    md.append("")
    with open(os.path.join(args.out, "published.md"), "w") as f:
        f.write("\n".join(md))
    print(md[4] if len(md) > 4 else "", file=sys.stderr)


if __name__ == "__main__":
    main()
