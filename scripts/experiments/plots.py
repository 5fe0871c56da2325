"""Shared plotting helpers of the experiment scripts: matplotlib (Debian's python3-matplotlib,
installed by scripts/setup.sh) on the non-interactive Agg backend, writing SVG files whose bytes
depend only on the data (no date, fixed ids), so a re-plot of the same data changes nothing."""
import os
import sys

try:
    import matplotlib
except ImportError:
    sys.exit(f"{os.path.basename(sys.argv[0])}: matplotlib is not importable from "
             f"{sys.executable}; install python3-matplotlib (bash scripts/setup.sh) and run the "
             "script with Debian's python3 (/usr/bin/python3)")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

plt.rcParams.update({
    "svg.hashsalt": "paci",     # fixed element ids: reproducible SVG bytes
    "svg.fonttype": "path",     # glyphs as paths: renders the same without the font installed
    "font.size": 10,
    "axes.grid": True,
    "grid.color": "#dddddd",
    "grid.linewidth": 0.8,
    "axes.axisbelow": True,
    "legend.fontsize": 9,
    "legend.framealpha": 0.9,
})

# One colour per schedule kind, the same in every plot.
SCHEDULE_COLORS = {"1f1b": "#1f77b4", "gpipe": "#17becf", "paci": "#d62728", "2bw": "#2ca02c",
                   "pipedream": "#9467bd", "paci-stash": "#ff7f0e", "zb": "#8c564b",
                   "interleaved": "#e377c2"}


def color(kind):
    return SCHEDULE_COLORS.get(kind, "black")


def figure(width_in=7.2, height_in=4.2, **kw):
    """A figure with one set of axes (or a grid of them, with subplots' keyword arguments)."""
    return plt.subplots(figsize=(width_in, height_in), **kw)


def tokens_axis(ax, label="tokens (millions)"):
    """x-axis in tokens, ticks written in millions."""
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x / 1e6:g}"))
    ax.set_xlabel(label)


def loss_curve(ax, curve, color, kind="train", label=None, alpha=0.35):
    """One loss curve [(x, loss), ...]: training loss thin and faint (alpha), validation loss
    thick."""
    if not curve:
        return None
    xs, ys = zip(*curve)
    if kind == "train":
        return ax.plot(xs, ys, color=color, linewidth=0.8, alpha=alpha, label=label)[0]
    return ax.plot(xs, ys, color=color, linewidth=2.2, label=label)[0]


def line_style_handles(train=True, val=True):
    """Legend entries that explain the two line styles, drawn in grey."""
    out = []
    if train:
        out.append(Line2D([], [], color="grey", linewidth=0.8, alpha=0.6, label="training loss"))
    if val:
        out.append(Line2D([], [], color="grey", linewidth=2.2, label="validation loss"))
    return out


def save(fig, path):
    """Writes the figure, in the format its name ends with (SVG for .svg, with no timestamp in
    the file), and closes it."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.tight_layout()
    try:
        if path.lower().endswith((".svg", ".pdf")):
            fig.savefig(path, metadata={"Date": None})
        else:
            fig.savefig(path, dpi=150)
    finally:
        plt.close(fig)
