#!/usr/bin/env python3
"""What paci plan picks for the mixture-of-experts presets on H100 and B200 clusters.

For Mixtral 8x7B and 8x22B, Qwen3-30B-A3B and 235B-A22B and DeepSeek-V3 (paci's presets, their own sequence
lengths), on 64 and 256 GPUs of H100 80GB and of B200, at a global batch of 256 sequences, bf16,
staleness 0: paci plan's default search (expert parallelism searched with the rest, and for a
mixture of experts the mirrored zb-v, dualpipev and dualpipe, "the V": DualPipe's overlapped
pairs hiding each pass's exposed collectives and all-to-alls, dualpipe with two copies of the
weights), then the same search without the V (the eight kinds
a dense model's default search covers). Writes docs/results/moe.md and moe.json: each pick, its
predicted step, MFU (on active parameters), memory, the V's gain and what searching it cost.

These are predictions. paci's MoE model was checked on 16 published MoE rows
(docs/results/published.md, stack "moe"): within 7% where the all-to-all crosses nodes, 7-67%
optimistic where the expert group sits inside one node (the dispatcher's host synchronisation and
the narrow grouped GEMMs are not modelled). No pick here has run.

    python3 scripts/experiments/moe.py [--paci build/cli/paci] [--out docs/results] [--jobs N]
                                       [--summary-only]
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

PRESETS = ["mixtral-8x7b", "mixtral-8x22b", "qwen3-30b-a3b", "qwen3-235b-a22b", "deepseek-v3"]
GPUS = [("h100-80gb", "H100 80GB"), ("b200", "B200")]
COUNTS = [64, 256]
GLOBAL_BATCH = 256
GiB = 2**30


def search(paci, preset, gpu, gpus, kinds, path, jobs):
    cmd = [paci, "plan", "--preset", preset, "--gpu", gpu, "--gpus", str(gpus), "--global-batch",
           str(GLOBAL_BATCH), "--max-staleness", "0", "--quiet", "--json", path,
           "--jobs", str(jobs)]
    if kinds:
        cmd += ["--kind", kinds]
    p = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if p.returncode in (1, 2) and "no configuration fits" in p.stderr:  # paci says what would
        return None, p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "nothing fits"
    if p.returncode != 0:
        sys.exit(f"moe: {' '.join(cmd)}: rc {p.returncode}: {p.stderr.strip()[:300]}")
    with open(path) as f:
        d = json.load(f)
    if not d["plans"]:
        return None, "nothing fits"
    return d, ""


def label(p):
    s = f"{p['kind']} t={p['tp']}"
    if p["cp"] > 1:
        s += f" c={p['cp']}"
    s += f" p={p['pp']} d={p['dp']} e={p['ep']}"
    if p["kind"] == "interleaved":
        s += f" v={p['chunks']}"
    s += f" b={p['microbatch_size']} M={p['microbatches']} {p['recompute']} z{p['zero']}"
    return s


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--paci", default=os.path.join(ROOT, "build", "cli", "paci"))
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "results"))
    ap.add_argument("--jobs", type=int, default=0, help="search threads (0: every core)")
    ap.add_argument("--summary-only", action="store_true",
                    help="rewrite moe.md from the moe.json already there, no search")
    args = ap.parse_args()
    if args.summary_only:
        with open(os.path.join(args.out, "moe.json")) as f:
            kept = json.load(f)
        write(args.out, kept["rows"], kept["seconds"])
        return
    rows = []
    started = time.time()
    eight = "gpipe,1f1b,pipedream,2bw,paci,zb-h1,zb-h2,interleaved"
    with tempfile.TemporaryDirectory() as tmp:
        for preset in PRESETS:
            for gpu, gpu_name in GPUS:
                for gpus in COUNTS:
                    print(f"moe: {preset} on {gpus} {gpu_name}", file=sys.stderr, flush=True)
                    row = {"preset": preset, "gpu": gpu, "gpu_name": gpu_name, "gpus": gpus}
                    for key, kinds in (("default", ""), ("eight", eight)):
                        path = os.path.join(tmp, f"{preset}_{gpu}_{gpus}_{key}.json")
                        began = time.time()
                        d, why = search(args.paci, preset, gpu, gpus, kinds, path, args.jobs)
                        row[key + "_search_s"] = round(time.time() - began, 2)
                        if d is None:
                            row[key] = {"fits": False, "why": why}
                            continue
                        p = d["plans"][0]
                        row[key] = {"fits": True, "label": label(p), "step_s": p["step_s"],
                                    "mfu": p["mfu"], "peak_gib": p["peak_memory_bytes"] / GiB,
                                    "bubble": p["bubble_ratio"], "kind": p["kind"],
                                    "configurations": d["search"]["configurations"],
                                    "simulated": d["search"].get("simulated", 0)}
                    rows.append(row)
    seconds = time.time() - started
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "moe.json"), "w") as f:
        json.dump({"global_batch": GLOBAL_BATCH, "seconds": round(seconds), "rows": rows}, f,
                  indent=1)
        f.write("\n")
    write(args.out, rows, seconds)


def write(out, rows, seconds):
    """docs/results/moe.md from the rows."""
    # For scale: what the published MoE runs measured, in paci's own count of MFU.
    measured = []
    published = os.path.join(ROOT, "docs", "results", "published.json")
    if os.path.exists(published):
        for r in json.load(open(published))["rows"]:
            if "moe" in r.get("stacks", []) and r["measured_step_s"] > 0:
                measured.append(100 * r["mfu"] * r["predicted_step_s"] / r["measured_step_s"])
    scale = (f" For scale: the {len(measured)} published MoE runs measured {min(measured):.0f}-"
             f"{max(measured):.0f}% MFU counted the same way (the highest NeMo's Mixtral 8x7B in "
             "FP8 on GB200); a pick predicted above that range is more likely a missing cost than "
             "a better plan." if measured else "")
    def slowdown(gpu):  # what paci plan's evaluate.cpp sets from the preset's SM count
        sms = json.load(open(os.path.join(ROOT, "plan", "hardware", "clusters", gpu + ".json")))["sms"]
        return sms / (sms - 20)
    slowdowns = ", ".join(f"{slowdown(gpu):.2f}x on {name.split()[0]}" for gpu, name in GPUS)
    lines = [
        "# paci plan on mixtures of experts",
        "",
        "Generated by `python3 scripts/experiments/moe.py` (about "
        f"{round(seconds / 60) or 1} minutes on 2 cores). Global batch {GLOBAL_BATCH} sequences of "
        "each preset's length, bf16, staleness 0. *default*: paci plan's whole default space, expert "
        "parallelism e searched (e dividing the experts and the t·c·d GPUs of a stage), and for a "
        "mixture of experts the mirrored schedules zb-v, dualpipev and dualpipe (*the V*: two "
        "stages a device; dualpipe one of each of two copies of the model, twice the weights and "
        "optimizer state, docs/costmodel.md) with the rest: DualPipe's "
        "overlapped pairs hide each pass's exposed collectives and all-to-alls behind the other "
        "pass's compute (docs/schedules.md), its compute slowed while the communication kernels "
        "hold 20 of the GPU's SMs (DeepSeek-V3's report, section 3.2.2: SMs / (SMs - 20), "
        f"{slowdowns}; docs/costmodel.md); the SMs' contention with the GEMMs beyond that and the "
        "kernels' own speed are not modelled. *Without the V*: the same search over the eight "
        "kinds a dense model's default covers (`--kind gpipe,...,interleaved`). MFU on active "
        "parameters. V gain: the step without the V over the default pick's. Search s: wall "
        "seconds of each search on this machine's 2 cores (one run each, another process "
        "sometimes sharing them: an indication, not a benchmark).",
        "",
        "These are predictions, none of them run. On the 16 published MoE rows "
        "([published.md](published.md), stack `moe`) paci was within 7% in the four where the "
        "all-to-all crosses nodes, and 7-67% optimistic (median 17%) in the twelve whose expert "
        "group sits inside one node or NVLink domain, DeepSeek-V3's four among them (7-9% on "
        "GB200, 21-36% on B200; the dispatcher's host synchronisation and narrow grouped GEMMs "
        "are not modelled): read every pick whose expert group sits inside one node with that in "
        "mind." + scale,
        "",
        "| model | GPUs | default pick | step s | MFU | GiB | pick without the V | step s | V gain "
        "| search s (without) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        d, v = r["default"], r["eight"]
        cells = [r["preset"], f"{r['gpus']} {r['gpu_name']}"]
        if d["fits"]:
            cells += [d["label"], f"{d['step_s']:.3f}", f"{100 * d['mfu']:.1f}%",
                      f"{d['peak_gib']:.1f}"]
        else:
            cells += [f"none fits: {d['why']}", "", "", ""]
        if v["fits"]:
            gain = f"{v['step_s'] / d['step_s']:.2f}x" if d["fits"] else ""
            cells += [v["label"], f"{v['step_s']:.3f}", gain]
        else:
            cells += [f"none fits: {v['why']}", "", ""]
        cells.append(f"{r['default_search_s']:.1f} ({r['eight_search_s']:.1f})")
        lines.append("| " + " | ".join(cells) + " |")
    fits = [r for r in rows if r["default"]["fits"] and r["eight"]["fits"]]
    vee = [r for r in fits if r["default"]["kind"] in ("zb-v", "dualpipev", "dualpipe")]
    dual = [r for r in fits if r["default"]["kind"] == "dualpipev"]
    two = [r for r in fits if r["default"]["kind"] == "dualpipe"]
    gains = sorted(r["eight"]["step_s"] / r["default"]["step_s"] for r in vee)
    ratio = sorted(r["default_search_s"] / r["eight_search_s"] for r in rows)
    lines += [
        "",
        f"The default pick is one of the V in {len(vee)} of the {len(fits)} cases that fit "
        f"(DualPipeV in {len(dual)}, DualPipe in {len(two)})" + (f", {gains[0]:.2f}x to {gains[-1]:.2f}x faster than the best plan "
        "without the V" if gains else "") + f"; searching the V took {ratio[len(ratio) // 2]:.1f}x "
        f"the time of the search without it (median; {ratio[0]:.1f}x to {ratio[-1]:.1f}x). A "
        "dense model's default search leaves the V out for its time (docs/plan.md): list it "
        "(`--kind ...,zb-v,dualpipev,dualpipe`) to weigh it there. DualPipe has about DualPipeV's "
        "bubble on the same devices (by DualPipe's README's formulas) with twice the weights, gradients and "
        "optimizer state, and each stage's update waits for its twin's gradients from the "
        "mirrored device (docs/costmodel.md, \"DualPipe's two copies\").",
        "",
    ]
    with open(os.path.join(out, "moe.md"), "w") as f:
        f.write("\n".join(lines))
    print(f"moe: wrote {os.path.join(out, 'moe.md')} ({len(rows)} cases, {seconds:.0f} s)",
          file=sys.stderr)


if __name__ == "__main__":
    main()
