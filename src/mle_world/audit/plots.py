"""The audit's plots: medal rates per configuration and regime, world-model calibration, best metric over time.

Reads the computed audit tables (and the PNGs it wrote before); writes `medal_rates.png`, `calibration.png`,
`best_metric_over_time.png` and `whatif_gates.png` into the audit dir (only those that have data), atomically.

Each PNG carries a digest of what it draws (the plotted numbers and this module's code) in a text
chunk: when the PNG already in the audit dir carries the same digest it is the same picture and is kept,
so re-auditing an unchanged sweep neither imports nor runs matplotlib.
"""

from __future__ import annotations

import gc
import hashlib
import io
import json
import struct
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mle_world.audit.analysis import LABELS, Curve, RateRow, WorldRow
from mle_world.audit.whatif import WhatIfRow
from mle_world.storage import write_bytes_atomic

DIGEST_KEY = "mle-world-plot-inputs"
"""PNG text chunk holding the digest of the figure's inputs."""
PNG_MODE = 0o644
"""Readable by a static web server running as another user (as the HTML pages)."""
MEDAL_METRICS = ("any_medal", "gold_medal", "silver_medal", "bronze_medal")


def medal_rates_data(rates: Sequence[RateRow]) -> dict[str, Any] | None:
    """Bars per metric and regime: x positions, heights (mean %) and error bars (SEM)."""
    rates = [r for r in rates if r.rates["any_medal"].mean is not None]
    if not rates:
        return None
    configs = sorted({r.configuration for r in rates})
    regimes = sorted({r.regime for r in rates})
    width = 0.8 / max(1, len(regimes))
    bars = []
    for metric in MEDAL_METRICS:
        for j, regime in enumerate(regimes):
            xs, ys, errs = [], [], []
            for i, cfg in enumerate(configs):
                row = next((r for r in rates if r.regime == regime and r.configuration == cfg), None)
                if row is None or row.rates[metric].mean is None:
                    continue
                xs.append(i + (j - (len(regimes) - 1) / 2) * width)
                ys.append(row.rates[metric].mean)
                errs.append(row.rates[metric].sem or 0.0)
            bars.append({"metric": metric, "regime": regime, "xs": xs, "ys": ys, "errs": errs})
    return {"configs": configs, "width": width, "bars": bars}


def calibration_data(world: Sequence[WorldRow]) -> dict[str, Any] | None:
    """One reliability line per configuration with calibration bins."""
    calibrated = [w for w in world if w.bins]
    if not calibrated:
        return None
    lines = []
    for w in calibrated:
        pts = [
            (b.mean_predicted, b.observed_rate)
            for b in w.bins
            if b.mean_predicted is not None and b.observed_rate is not None
        ]
        if pts:
            lines.append(
                {
                    "label": f"{w.configuration} (n={w.labelled})",
                    "xs": [p for p, _ in pts],
                    "ys": [o for _, o in pts],
                    "linewidth": 2 if w.configuration == "all" else 1,
                }
            )
    return {"lines": lines}


def curves_data(curves: Sequence[Curve]) -> dict[str, Any] | None:
    """The best-so-far curves per regime x configuration."""
    if not curves:
        return None
    lines = [
        {
            "style": "-" if c.regime == "gated" else "--",
            "label": f"{c.regime}/{c.configuration} (n={c.trials})",
            "times": c.times,
            "values": c.values,
        }
        for c in curves
    ]
    return {"lines": lines}


DPI = 120
_POINT = 1 / 72
"""Inches per point."""
_PAD = 1.08 * 10 * _POINT
"""Space between the outermost text and the figure's edge, and between neighbouring axes (tight_layout's)."""
_TICK = 3.5 * _POINT
"""Length of a tick mark outside the axes (for an axes whose tick labels are hidden)."""


def new_figure(width: float, height: float) -> Any:
    """A figure drawn by the Agg canvas (PNG) at the plots' resolution."""
    first = "matplotlib.figure" not in sys.modules
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if first:
        # Importing matplotlib leaves reference cycles (pyparsing's parse exceptions and their
        # tracebacks) that hold the importing frames and, through them, the caller's whole audit.
        # The audit pauses the cyclic GC, so only the full collection at exit freed them: 0.25 s of
        # CPU for 10,000 trials. A collection of the young objects frees them now.
        gc.collect(1)
    figure = Figure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(figure)
    return figure


def tick_labels(axis: Any) -> list[Any]:
    """The tick labels `axis` draws: shown, not empty, at a tick inside the view (the locator also
    places one tick beyond each end)."""
    axis.get_majorticklabels()  # formats the labels for the current view
    low, high = sorted(axis.get_view_interval())
    slack = 1e-9 * (high - low)
    return [
        tick.label1
        for tick in axis.get_major_ticks()
        if tick.label1.get_visible()
        and tick.label1.get_text()
        and low - slack <= tick.get_loc() <= high + slack
    ]


def fit_margins(figure: Any, axes: Sequence[Any]) -> None:
    """Margins and gaps around a row of axes such that their titles, axis labels and tick labels fit.

    What `Figure.tight_layout` finds, measured on those texts only: tight_layout lays out every artist
    of the figure for it, which cost as much as drawing the figure.
    """
    renderer = figure.canvas.get_renderer()
    width, height = (float(x) * DPI for x in figure.get_size_inches())
    pad = _PAD * DPI
    lefts, rights, bottoms, tops = [], [], [], []
    for ax in axes:
        box = ax.bbox
        xticks = [t.get_window_extent(renderer) for t in tick_labels(ax.xaxis)]
        yticks = [t.get_window_extent(renderer) for t in tick_labels(ax.yaxis)]
        # Below and left of the axes: its tick labels (or bare tick marks), then the axis label
        # (matplotlib moves it beyond the tick labels when drawing).
        below = box.y0 - min((b.y0 for b in xticks), default=box.y0)
        beside = box.x0 - min((b.x0 for b in yticks), default=box.x0 - _TICK * DPI)
        # What sticks out along the axes: the ends of slanted tick labels, and of a long axis label
        # (centred on its axis; until drawn, only its position along the axis is right).
        across = [*xticks]  # beyond the left and right edges
        along = []  # beyond the bottom and top edges
        xlabel, ylabel = ax.xaxis.label, ax.yaxis.label
        if xlabel.get_text():
            extent = xlabel.get_window_extent(renderer)
            below += ax.xaxis.labelpad * _POINT * DPI + extent.height
            across.append(extent)
        if ylabel.get_text():
            extent = ylabel.get_window_extent(renderer)
            beside += ax.yaxis.labelpad * _POINT * DPI + extent.width
            along.append(extent)
        above = ax.title.get_window_extent(renderer).y1 - box.y1 if ax.title.get_text() else 0.0
        # The axes' own box is part of what must fit: nothing is negative.
        lefts.append(max(0.0, beside, *(box.x0 - b.x0 for b in across)))
        rights.append(max(0.0, *(b.x1 - box.x1 for b in across)))
        bottoms.append(max(0.0, below, *(box.y0 - b.y0 for b in along)))
        tops.append(max(0.0, above, *(b.y1 - box.y1 for b in along)))
    margin_left, margin_right = (lefts[0] + pad) / width, (rights[-1] + pad) / width
    gap = max((r + nxt + pad for r, nxt in zip(rights, lefts[1:], strict=False)), default=0.0) / width
    axes_width = (1 - margin_left - margin_right - gap * (len(axes) - 1)) / len(axes)
    bottom, top = (max(bottoms) + pad) / height, 1 - (max(tops) + pad) / height
    if axes_width <= 0 or bottom >= top:
        return  # labels too big for the figure: matplotlib's default margins (as tight_layout leaves them)
    figure.subplots_adjust(
        left=margin_left, right=1 - margin_right, bottom=bottom, top=top, wspace=gap / axes_width
    )


def draw_medal_rates(data: dict[str, Any]) -> Any:
    configs = data["configs"]
    fig = new_figure(4 * len(MEDAL_METRICS), 3.8)
    axes = fig.subplots(1, len(MEDAL_METRICS), sharey=True)
    for ax, metric in zip(axes, MEDAL_METRICS, strict=True):
        xs, lows, highs = [], [], []
        for bar in data["bars"]:
            if bar["metric"] == metric:
                ax.bar(bar["xs"], bar["ys"], width=data["width"], label=bar["regime"])
                xs += bar["xs"]
                lows += [y - e for y, e in zip(bar["ys"], bar["errs"], strict=True)]
                highs += [y + e for y, e in zip(bar["ys"], bar["errs"], strict=True)]
        # The error bars of all regimes as one collection and their caps as one line of markers (what
        # ax.bar(yerr=..., capsize=3) draws, with a container of artists per regime).
        ax.vlines(xs, lows, highs, colors="k", linewidth=1.5)
        ax.plot(xs + xs, lows + highs, linestyle="none", marker="_", markersize=6, color="k")
        ax.set_title(LABELS[metric], y=1.0)  # y given: matplotlib skips measuring the axes to place it
        ax.set_xticks(range(len(configs)), configs, rotation=45, ha="right", fontsize=8)
    axes[0].set_ylabel("% of tasks (mean ± SEM over seeds)")
    axes[0].legend(fontsize=8)
    fit_margins(fig, axes)
    return fig


def draw_calibration(data: dict[str, Any]) -> Any:
    fig = new_figure(4.8, 4.5)
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1], "k--", linewidth=1, label="perfect")
    for line in data["lines"]:
        ax.plot(line["xs"], line["ys"], marker="o", linewidth=line["linewidth"], label=line["label"])
    ax.set_xlabel("predicted p_improves")
    ax.set_ylabel("observed improvement rate")
    ax.set_title("World-model calibration (ungated)", y=1.0)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7)
    fit_margins(fig, [ax])
    return fig


def draw_curves(data: dict[str, Any]) -> Any:
    fig = new_figure(6.4, 4.2)
    ax = fig.subplots()
    for line in data["lines"]:
        ax.plot(line["times"], line["values"], line["style"], label=line["label"])
    ax.set_xlabel("hours since first node (steps when the journal has no times)")
    ax.set_ylabel("best metric so far (normalised per task)")
    ax.set_title("Best metric over time", y=1.0)
    ax.legend(fontsize=7)
    fit_margins(fig, [ax])
    return fig


def digest(data: dict[str, Any]) -> str:
    """What a figure shows, and the code drawing it, as one hex digest."""
    code = Path(__file__).read_bytes()
    blob = json.dumps(data, sort_keys=True, allow_nan=True).encode() + b"\0" + code
    return hashlib.sha256(blob).hexdigest()


def png_text(path: Path, keyword: str) -> str | None:
    """The `keyword` text chunk of a complete PNG file, or None (no file, no such chunk, truncated)."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        return None
    found, pos, prefix = None, 8, keyword.encode("latin-1") + b"\0"
    while pos + 8 <= len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if len(body) < length:
            return None
        if kind == b"tEXt" and body.startswith(prefix):
            found = body[len(prefix) :].decode("latin-1")
        if kind == b"IEND":
            return found
        pos += 12 + length
    return None


def save_png(fig: Any, path: Path, key: str) -> None:
    """Draw `fig` to `path` atomically, its inputs' digest in a text chunk.

    Encoded here rather than by `print_png`: an opaque figure (white background: every pixel) is stored
    without its alpha channel, and with zlib's fastest level. PNG is lossless, so the picture is the
    same; the file is no bigger (level 6 of four channels was about 1/6 of drawing a figure).
    """
    from PIL import Image, PngImagePlugin

    canvas = fig.canvas
    canvas.draw()
    image = Image.frombuffer("RGBA", canvas.get_width_height(), canvas.buffer_rgba(), "raw", "RGBA", 0, 1)
    if image.getchannel("A").getextrema() == (255, 255):
        image = image.convert("RGB")
    info = PngImagePlugin.PngInfo()
    info.add_text(DIGEST_KEY, key)
    buffer = io.BytesIO()
    image.save(buffer, format="png", pnginfo=info, compress_level=1, dpi=(DPI, DPI))
    write_bytes_atomic(path, buffer.getvalue(), PNG_MODE, durable=False)


def write_plots(
    rates: Sequence[RateRow],
    world: Sequence[WorldRow],
    curves: Sequence[Curve],
    out_dir: Path,
    draw: bool = True,
) -> list[str]:
    """Write the PNGs that have data (keeping those already drawn from the same inputs); their file names.

    `draw` off (`audit --no-plots`): nothing is drawn and matplotlib is not imported; only the PNGs
    already drawn from the same inputs are kept and named (one whose inputs changed is left out).
    """
    figures = (
        ("medal_rates.png", medal_rates_data(rates), draw_medal_rates),
        ("calibration.png", calibration_data(world), draw_calibration),
        ("best_metric_over_time.png", curves_data(curves), draw_curves),
    )
    written = []
    for name, data, drawing in figures:
        if data is None:
            continue
        key, path = digest(data), out_dir / name
        if png_text(path, DIGEST_KEY) != key:
            if not draw:
                continue
            save_png(drawing(data), path, key)
        written.append(name)
    return written


WHATIF_PNG = "whatif_gates.png"


def whatif_data(curves: Sequence[WhatIfRow]) -> dict[str, Any] | None:
    """Per configuration and stage, the threshold sweep at its own min_confidence and bug_threshold:
    skip share against the share of improvements lost, and precision against the threshold."""
    lines: dict[tuple[str, str], dict[str, Any]] = {}
    for row in curves:
        line = lines.setdefault(
            (row.configuration, row.stage),
            {"label": f"{row.configuration}/{row.stage} (n={row.decisions})", "trade": [], "precision": []},
        )
        if row.skip_share is not None and row.lost_share is not None:
            line["trade"].append([row.skip_share, row.lost_share, row.paper])
        if row.precision is not None:
            line["precision"].append([row.setting.threshold, row.precision, row.paper])
    shown = [line for line in lines.values() if line["trade"] or line["precision"]]
    return {"lines": shown} if shown else None


def draw_whatif(data: dict[str, Any]) -> Any:
    fig = new_figure(10, 4.2)
    trade, precision = fig.subplots(1, 2)
    for line in data["lines"]:
        color = trade.plot(
            [p[0] for p in line["trade"]], [p[1] for p in line["trade"]], marker=".", label=line["label"]
        )[0].get_color()
        precision.plot(
            [p[0] for p in line["precision"]], [p[1] for p in line["precision"]], marker=".", color=color
        )
        for ax, points in ((trade, line["trade"]), (precision, line["precision"])):
            marked = [p for p in points if p[2]]
            ax.plot([p[0] for p in marked], [p[1] for p in marked], "*", markersize=12, color=color)
    trade.set_xlabel("share of executions the gate would skip")
    trade.set_ylabel("share of improvements it would lose")
    trade.set_title("What-if gates: threshold sweep (★ paper)", y=1.0)
    precision.set_xlabel("threshold (p_improves)")
    precision.set_ylabel("precision of 'would skip'")
    precision.set_title("Would-skips that did not improve", y=1.0)
    for ax in (trade, precision):
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1.02)
    trade.legend(fontsize=7)
    fit_margins(fig, [trade, precision])
    return fig


def write_whatif_plot(curves: Sequence[WhatIfRow], out_dir: Path, draw: bool = True) -> list[str]:
    """`whatif_gates.png` when there are what-if rows (kept when drawn from the same inputs); its name.
    `draw` off: as in `write_plots`, only a PNG already drawn from the same inputs is kept and named."""
    data = whatif_data(curves)
    if data is None:
        return []
    key, path = digest(data), out_dir / WHATIF_PNG
    if png_text(path, DIGEST_KEY) != key:
        if not draw:
            return []
        save_png(draw_whatif(data), path, key)
    return [WHATIF_PNG]
