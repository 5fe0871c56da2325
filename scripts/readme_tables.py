#!/usr/bin/env python3
"""Fills the generated blocks of README.md, docs/cli.md and docs/results/README.md (from their
templates docs/README.md.in, docs/cli.md.in, docs/results/README.md.in) with what the commands
wrote into docs/results/ and with live output of the paci binary (compare, analyze, validate,
plan). Run after the experiments: python3 scripts/readme_tables.py."""
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


PLAN_EXAMPLE = ("paci plan --preset llama3-70b --gpu h100-80gb --gpus 64 --global-batch 512 "
                "--tp 8 --pp 4 --microbatch-size 1 --kind 1f1b --recompute selective "
                "--sequence-parallel --tp-comm-overlap off --zero 1 "
                "--overlap-grad-reduce")


def published_headline():
    path = os.path.join(ROOT, "docs", "results", "published.json")
    if not os.path.exists(path):
        return "(run scripts/experiments/published.sh)"
    s = json.load(open(path))["summary"]
    return (f"Over its {s['held_out_rows']} rows from {len(s['sources'])} sources, none of which set "
            f"a constant: median |error| of the step time {100 * s['held_out_median_abs_error']:.1f}%, "
            f"worst {100 * s['held_out_worst_abs_error']:.1f}%, {s['held_out_within_25pct']} of "
            f"{s['held_out_rows']} within 25%; median signed error "
            f"{100 * s['held_out_signed_median_error']:+.1f}% (negative: paci predicts faster "
            f"than measured). By stack (median |error|, signed): "
            + "; ".join(f"{k} {b['rows']} rows {100 * b['median_abs_error']:.1f}%, "
                        f"{100 * b['signed_median_error']:+.1f}%"
                        for k, b in s.get("by_stack", {}).items()) + ".")


def experts_headline():
    path = os.path.join(ROOT, "docs", "results", "experts.json")
    if not os.path.exists(path):
        return ""
    rows = json.load(open(path))
    ok = sum(r["gain"] >= 1 - 1e-9 for r in rows)
    fits = sum(r["expert_fits"] for r in rows)
    return (f"the default search's pick is at least as fast as the expert's configuration, in "
            f"paci's model, in {ok} of {len(rows)} (gains {min(r['gain'] for r in rows):.2f}x to "
            f"{max(r['gain'] for r in rows):.2f}x); {fits} of the {len(rows)} expert "
            f"configurations fit paci's memory limit (docs/results/experts.md).")


def interop_headline():
    path = os.path.join(ROOT, "docs", "results", "interop.json")
    if not os.path.exists(path):
        return "- (run `bash scripts/interop.sh --summary docs/results/interop.json`)"
    s = json.load(open(path))
    return (
        "- **What `paci plan` emits and reads, run by the tools' own code** (`bash "
        "scripts/interop.sh --summary docs/results/interop.json`; the test command runs it "
        f"too): {s['passed']} of {s['checks']} checks pass in {s['seconds']} s: {s['plans']} "
        "plans' schedule CSVs on PyTorch's gloo pipelines (gradients within 1e-10 of one "
        "process), their torchtitan 0.3.0 commands through its parser, parallel dimensions, FSDP "
        "resharding, HSDP groups and stage split, their Megatron-LM flags through core_v0.16.1's "
        "recorded parser and megatron-core's config and stage split; "
        + (f"{s['schedules']} ZB-V and DualPipeV schedules (V-shaped: two stages a rank; "
           "DualPipeV's overlapped F&B pairs) on the same pipelines; "
           if s.get("schedules") else "")
        + (f"{s['pytorch_schedules']} of PyTorch's own schedules (ZBVZeroBubble, Interleaved1F1B, "
           "DualPipeV) written by its code and read by `paci simulate`, each stage on PyTorch's "
           "rank, ZB-V's and DualPipeV's equal to paci's cell for cell"
           + (f", and {s['pytorch_schedule_refusals']} it cannot read refused"
              if s.get("pytorch_schedule_refusals") else "") + "; "
           if s.get("pytorch_schedules") else "") +
        f"{s['launches']} users' launches read by `--from-*` exactly as megatron-core and "
        "torchtitan read them (the GEMM precision among what must agree); "
        f"{s['refusals']} refused plans (with and without `-o DIR`), {s['refused_launches']} "
        f"refused launches and {s['self_tests']} self-tests ([interop.md](docs/interop.md))")


def moe_headline():
    path = os.path.join(ROOT, "docs", "results", "moe.json")
    if not os.path.exists(path):
        return ""
    rows = json.load(open(path))["rows"]
    fits = [r for r in rows if r["default"]["fits"]]
    ep = sum(" e=1 " not in r["default"]["label"] for r in fits)
    vee = sum(r["default"]["kind"] in ("zb-v", "dualpipev", "dualpipe") for r in fits)
    dual = sum(r["default"]["kind"] == "dualpipev" for r in fits)
    two = sum(r["default"]["kind"] == "dualpipe" for r in fits)
    mfu = [100 * r["default"]["mfu"] for r in fits]
    return (f"Mixtral 8x7B and 8x22B, Qwen3-30B-A3B and 235B-A22B and DeepSeek-V3 on 64 and 256 "
            f"H100s and B200s "
            f"({len(rows)} cases, predictions, none run): {len(fits)} fit; the default pick "
            f"shards the experts (e > 1) in {ep} of them, MFU {min(mfu):.0f}-{max(mfu):.0f}% on "
            f"active parameters; the V schedules and DualPipe, searched for mixtures of experts, "
            f"are the pick in {vee} of the {len(fits)} (DualPipeV in {dual}, DualPipe in {two}) "
            f"([moe.md](docs/results/moe.md))")


def moe_ep_headline():
    path = os.path.join(ROOT, "docs", "results", "moe_ep.json")
    if not os.path.exists(path):
        return ""
    d = json.load(open(path))
    base = d["rows"][0]
    parts = []
    for r in d["rows"][1:]:
        t = r["tokens_per_s"]
        parts.append(f"--ep {r['ep']}: {r['peak_bytes'] / base['peak_bytes']:.2f}x the memory a "
                     f"process, {t['median'] / base['tokens_per_s']['median']:.2f}x the tokens/s "
                     f"({t['median']:,.0f} [{t['min']:,.0f}, {t['max']:,.0f}])")
    b = base["tokens_per_s"]
    return (f"one process {b['median']:,.0f} tokens/s [{b['min']:,.0f}, {b['max']:,.0f}], "
            f"{base['peak_bytes'] / 2**20:.0f} MiB; " + "; ".join(parts) +
            f"; the same losses bit for bit ({d['repeats']} runs each, {d['machine']}) "
            "([moe_ep.md](docs/results/moe_ep.md))")


def moe_train_headline():
    path = os.path.join(ROOT, "docs", "results", "moe_train.json")
    if not os.path.exists(path):
        return ""
    r = json.load(open(path))
    models = {m["name"]: m for m in r["models"]}
    dense = models["dense"]

    def val(m):
        v = m["final_val_loss"]
        return f"{v['median']:.3f} [{v['min']:.3f}, {v['max']:.3f}]"

    def load(m):
        x = m.get("expert_load")
        return f", busiest expert {x['median']:.2f}x the mean load" if x else ""

    parts = [f"{m['description'].split(': ', 1)[1]} {val(m)} "
             f"({m['parameters'] / dense['parameters']:.1f}x the parameters{load(m)})"
             for m in r["models"] if m["name"] != "dense"]
    seeds = len(dense["val_curves"])
    return (f"the dense GPT and its mixtures of experts of the same FLOPs a token, {r['steps']} "
            f"steps on KJV, {seeds} seeds: validation loss dense {val(dense)}, " +
            ", ".join(parts) + " ([moe_train.md](docs/results/moe_train.md))")


def results_headlines():
    lines = []
    fid = read("docs/results/fidelity_headline.md", "")
    if fid:
        lines.append("- **The simulator against the executor on this CPU** "
                     "(`bash scripts/experiments/fidelity.sh`): " + fid)
    lines.append("- **`paci plan` against published GPU training runs** "
                 "(`bash scripts/experiments/published.sh`): " + published_headline())
    experts = experts_headline()
    if experts:
        lines.append("- **`paci plan` against the experts' configurations** "
                     "(`python3 scripts/experiments/experts.py`): " + experts)
    picks = read("docs/results/plan_headline.md", "")
    if picks:
        lines.append("- **What `paci plan` picks** (`bash scripts/experiments/plan.sh`, with staleness "
                     "allowed up to one update): " + picks)
    moe = moe_headline()
    if moe:
        lines.append("- **`paci plan` on mixtures of experts** "
                     "(`python3 scripts/experiments/moe.py`): " + moe)
    cpu = read("docs/results/plan_cpu_headline.md", "")
    if cpu:
        lines.append("- **`paci plan` on this CPU, its top plans trained** "
                     "(`bash scripts/experiments/plan_cpu.sh`): " + cpu)
    speed = read("docs/results/bench_plan_headline.md", "")
    if speed:
        lines.append("- **How fast `paci plan` searches** (`bash bench/bench_plan.sh`): " + speed +
                     " ([bench_plan.md](docs/results/bench_plan.md))")
    gate = read("docs/results/gate_headline.md", "")
    if gate:
        lines.append("- **The GPT trains** (`bash scripts/experiments/gate.sh`): " + gate)
    moe_train = moe_train_headline()
    if moe_train:
        lines.append("- **The mixture-of-experts GPT trains** "
                     "(`bash scripts/experiments/moe_train.sh`): " + moe_train)
    moe_ep = moe_ep_headline()
    if moe_ep:
        lines.append("- **Expert parallelism on this CPU** "
                     "(`bash scripts/experiments/moe_ep.sh`): " + moe_ep)
    return "\n".join(lines)


rows = []
for n in (8, 32, 128, 512):
    j = json.loads(run(f"paci compare -p 8 -m 8 -n {n} --kinds 1f1b,paci -f json"))
    f = next(r for r in j["rows"] if r["kind"] == "1f1b")
    p = next(r for r in j["rows"] if r["kind"] == "paci")
    rows.append(f"| {n} | {f['makespan_s']:g} | {p['makespan_s']:g} | {p['speedup_vs_1f1b']:.3f}× |")
# The V-shaped schedules beside 1F1B, ZB-H1 and PACI, simulated at uniform costs with an F&B that
# hides half a forward's time; activations in one stage's worth of one micro-batch (1 MB each).
V_COMPARE = ("paci compare -p 4 -m 8 -n 8 --tf 1 --tb 2 --tw 1 --tfb 2.5 --activation-bytes 1000000 "
             "--kinds 1f1b,zb-h1,zb-v,dualpipev,dualpipe,paci")


def v_table():
    j = json.loads(run(V_COMPARE + " -f json"))
    rows = {r["kind"]: r for r in j["rows"]}
    d, z, p, dp = rows["dualpipev"], rows["zb-v"], rows["paci"], rows["dualpipe"]
    findings = (
        f"DualPipeV's pairs buy it {d['speedup_vs_1f1b']:.2f}x over 1F1B at "
        f"{d['peak_memory_bytes'] / z['peak_memory_bytes']:.3g}x ZB-V's activations (PP + 1 "
        f"half-stages a device against PP); DualPipe, the same order on twice the devices' worth "
        f"of stages (two copies of the model, each device a stage of each), "
        f"{dp['speedup_vs_1f1b']:.2f}x with PP + 1 whole stages' activations and its weights "
        f"twice; ZB-V, with no pair but a zero bubble at F = I = W, "
        f"runs at {z['speedup_vs_1f1b']:.2f}x; PACI at {p['speedup_vs_1f1b']:.2f}x without a V, "
        f"at {p['max_staleness']} update of staleness.")
    lines = ["| kind | makespan s | bubble | activations a device (stages' worth) | staleness | "
             "vs 1F1B |", "|---|---|---|---|---|---|"]
    for r in j["rows"]:
        lines.append(f"| {r['kind']} | {r['makespan_s']:g} | {100 * r['bubble_ratio']:.1f}% | "
                     f"{r['peak_memory_bytes'] / 1e6:g} | {r['max_staleness']} | "
                     f"{r['speedup_vs_1f1b']:.2f}x |")
    return "\n".join(lines) + "\n\n" + findings


def fidelity_moe_line():
    """paci fidelity's table for the MoE GPT (scripts/experiments/fidelity_moe.sh), in words."""
    path = os.path.join(ROOT, "docs", "results", "fidelity_moe.md")
    if not os.path.exists(path):
        return "not yet: bash scripts/experiments/fidelity_moe.sh"
    parts, inside, rows, machine = [], 0, 0, "machine not stated"
    for line in open(path):
        if line.startswith("Measured on "):
            machine = line.strip().removeprefix("Measured on ").rstrip(".")
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) > 7 and cells[0] in ("1f1b", "paci", "zb-h1", "dualpipev"):
            rows += 1
            inside += cells[4] == "yes"
            first = cells[7].split("(")[-1].rstrip(")")
            parts.append(f"{cells[0]} predicted {cells[1]} s, measured {cells[2]} s ({cells[3]}; "
                         f"calibrated once first, {first})")
    return (f"on {machine}: {inside} of {rows} predictions inside the measured range; " +
            "; ".join(parts) + " ([fidelity_moe.md](fidelity_moe.md))")


blocks = {
    "FIDELITY_MOE_LINE": fidelity_moe_line(),
    "V_SCHEDULES_COMMAND": V_COMPARE,
    "V_SCHEDULES_TABLE": v_table(),
    "FIDELITY_V_LINK": read("docs/results/fidelity_v_headline.md",
                            "not yet: bash scripts/experiments/fidelity_v.sh"),
    "RESULTS_HEADLINES": results_headlines(),
    "INTEROP_HEADLINE": interop_headline(),
    "PUBLISHED_HEADLINE": published_headline(),
    "BENCH_PLAN_ROW": read("docs/results/bench_plan_headline.md", "(run build/bench/bench_plan)"),
    "FIDELITY_TABLE_P2": read("docs/results/fidelity_P2.md", "(run scripts/experiments/fidelity.sh)"),
    "FIDELITY_TABLE_P4": read("docs/results/fidelity_P4.md", "(run scripts/experiments/fidelity.sh)"),
    "FIDELITY_HEADLINE": read("docs/results/fidelity_headline.md", "").rstrip("."),
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
    "PLAN_EXAMPLE_COMMAND": PLAN_EXAMPLE,
    "PLAN_EXAMPLE_OUTPUT": run(PLAN_EXAMPLE).rstrip(),
}
for template_path, out_path in (("docs/README.md.in", "README.md"),
                                 ("docs/cli.md.in", "docs/cli.md"),
                                 ("docs/results/README.md.in", "docs/results/README.md")):
    template = read(template_path, None)
    if template is None:
        raise SystemExit(f"{template_path} is missing")
    # Longest keys first: no key is replaced inside another's name.
    for key in sorted(blocks, key=len, reverse=True):
        template = template.replace(key, blocks[key])
    open(os.path.join(ROOT, out_path), "w").write(template + "\n")
    print(f"{out_path} regenerated")
