#!/usr/bin/env python3
"""Plots simulator fidelity: what `paci fidelity --json` measured against what the simulator
predicted, one panel per input file (one per pipeline depth, e.g. P=2 and P=4).

    plot_fidelity.py IN.json [IN2.json ...] -o OUT.svg

Per schedule kind: the measured makespan (median, with a bar from the fastest to the slowest run),
the simulator's prediction and, when the file has it, the prediction with independent devices.
An input that is missing, empty or not in paci fidelity's format is reported in one line, exit
status 2."""
import argparse
import json
import math
import os
import sys
import textwrap

PROG = "plot_fidelity.py"


class InputError(Exception):
    pass


def number(value, what, optional=False):
    """A finite number (not a bool), or None for a missing optional one."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputError(f"{what} is missing" if value is None else
                         f"{what} is {value!r}, not a finite number")
    return float(value)


def load(path):
    """One input file, checked: {"title": ..., "machine": ..., "runs": [...]}, each run with
    kind, measured (median, low, high), predicted and independent (None when absent)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise InputError(f"cannot read it: {e.strerror or e}")
    except UnicodeDecodeError:
        raise InputError("not a text (UTF-8) file")
    if not text.strip():
        raise InputError("the file is empty")
    try:
        data = json.loads(text)
    except ValueError as e:
        raise InputError(f"not valid JSON: {e}")
    if not isinstance(data, dict):
        raise InputError("not a paci fidelity report (expected a JSON object)")
    runs = data.get("runs")
    if not isinstance(runs, list) or not runs:
        raise InputError('no "runs" list, or it is empty')
    out = []
    for i, r in enumerate(runs):
        if not isinstance(r, dict):
            raise InputError(f"runs[{i}] is not an object")
        kind = r.get("kind")
        if not isinstance(kind, str) or not kind:
            raise InputError(f'runs[{i}] has no "kind"')
        processes = r.get("processes", 1)
        if isinstance(processes, int) and not isinstance(processes, bool) and processes > 1:
            kind = f"{kind}\n{processes} proc."  # one process per device (MPI)
        where = f"runs[{i}] ({kind}): "
        try:
            median = number(r.get("measured_makespan_s"), "measured_makespan_s")
            predicted = number(r.get("predicted_makespan_s"), "predicted_makespan_s")
            independent = number(r.get("independent_makespan_s"), "independent_makespan_s",
                                 optional=True)
            samples = r.get("measured_makespans_s")
            if samples is not None:
                if not isinstance(samples, list):
                    raise InputError("measured_makespans_s is not a list")
                samples = [number(x, "an entry of measured_makespans_s") for x in samples]
            low = number(r.get("measured_min_s"), "measured_min_s", optional=True)
            high = number(r.get("measured_max_s"), "measured_max_s", optional=True)
        except InputError as e:
            raise InputError(where + str(e))
        if low is None and samples:
            low = min(samples)
        if high is None and samples:
            high = max(samples)
        low = median if low is None else low
        high = median if high is None else high
        if not low <= median <= high:
            raise InputError(f"{where}the median {median:g} s is not between the minimum "
                             f"{low:g} s and the maximum {high:g} s")
        out.append({"kind": kind, "median": median, "low": low, "high": high,
                    "predicted": predicted, "independent": independent,
                    "samples": len(samples) if samples else None, "run": r})
    return {"title": title(data, out), "runs": out}


def title(data, runs):
    """'P=2, M=4, N=8, 5 runs each' and the machine line, from "settings" and "machine"; older
    files without "settings" give what their runs say."""
    settings = data.get("settings") if isinstance(data.get("settings"), dict) else {}
    first = runs[0]["run"]

    def setting(key, run_key):
        v = settings.get(key, first.get(run_key))
        return "?" if v is None else v

    repeats = settings.get("repeats", runs[0]["samples"])
    line = (f"P={setting('stages', 'stages')}, M={setting('microbatches', 'microbatches')}, "
            f"N={setting('steps', 'steps')}, {'?' if repeats is None else repeats} runs each")
    machine = data.get("machine") if isinstance(data.get("machine"), dict) else {}
    parts = []
    if machine.get("cores") is not None:
        parts.append(f"{machine['cores']} cores")
    parts += [str(machine[k]) for k in ("cpu", "blas") if machine.get(k)]
    lines = []  # the machine's parts, a line as long as fits over a panel
    for part in parts:
        if lines and len(lines[-1]) + 2 + len(part) <= 56:
            lines[-1] += ", " + part
        else:
            lines += textwrap.wrap(part, 56)
    return "\n".join([line] + lines)


def main():
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    ap.add_argument("inputs", nargs="+", metavar="IN.json",
                    help="paci fidelity --json reports, one panel each")
    ap.add_argument("-o", "--output", required=True, metavar="OUT.svg",
                    help="the plot (SVG; .png and .pdf work too)")
    args = ap.parse_args()

    panels = []
    for path in args.inputs:
        try:
            panels.append(load(path))
        except InputError as e:
            print(f"{PROG}: {path}: {e}", file=sys.stderr)
            return 2

    import plots  # only now: a bad input is reported without waiting for matplotlib

    n = len(panels)
    fig, axes = plots.figure(max(5.0, 4.6 * n), 4.4, ncols=n, squeeze=False)
    for ax, panel in zip(axes[0], panels):
        runs = panel["runs"]
        xs = range(len(runs))
        has_independent = any(r["independent"] is not None for r in runs)
        dx = 0.16  # measured in the middle, the predictions either side
        ax.errorbar([x - dx for x in xs], [r["median"] for r in runs],
                    yerr=[[r["median"] - r["low"] for r in runs],
                          [r["high"] - r["median"] for r in runs]],
                    fmt="o", color="black", ecolor="black", elinewidth=1.2, capsize=4,
                    markersize=6, label="measured (median, min to max)")
        ax.plot(list(xs), [r["predicted"] for r in runs], linestyle="none", marker="D",
                markersize=6, color="#d62728", label="simulator prediction")
        if has_independent:
            pts = [(x, r["independent"]) for x, r in zip(xs, runs) if r["independent"] is not None]
            ax.plot([x + dx for x, _ in pts], [y for _, y in pts], linestyle="none", marker="^",
                    markersize=7, markerfacecolor="none", markeredgewidth=1.4, color="#1f77b4",
                    label="prediction, independent devices")
        ax.set_xticks(list(xs))
        ax.set_xticklabels([r["kind"] for r in runs], rotation=30 if len(runs) > 5 else 0,
                           ha="right" if len(runs) > 5 else "center")
        ax.set_xlim(-0.6, len(runs) - 0.4)
        ax.set_xlabel("schedule")
        ax.set_ylabel("makespan (s)")
        ax.grid(axis="x", visible=False)
        ys = [y for r in runs for y in (r["low"], r["high"], r["predicted"], r["independent"])
              if y is not None]
        span = (max(ys) - min(ys)) or max(ys) * 0.1 or 1.0
        ax.set_ylim(min(ys) - 0.08 * span, max(ys) + 0.45 * span)  # room for the legend
        ax.set_title(panel["title"], fontsize=9)
        handles, labels = ax.get_legend_handles_labels()
        order = sorted(range(len(labels)), key=lambda i: not labels[i].startswith("measured"))
        ax.legend([handles[i] for i in order], [labels[i] for i in order], loc="upper right",
                  fontsize=8)
    try:
        plots.save(fig, args.output)
    except (OSError, ValueError) as e:
        print(f"{PROG}: cannot write {args.output}: {e}", file=sys.stderr)
        return 2
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
