"""The audit's PNGs are drawn again only when what they show changes: a PNG carrying the digest of the same
inputs is kept, a changed number, a truncated or foreign PNG is redrawn; and their margins fit their labels.

Reads nothing; writes a small synthetic sweep and its plots under tmp_path.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from pathlib import Path

import matplotlib as mpl
from synthetic import make_sweep

from mle_world.audit import audit
from mle_world.audit.plots import (
    DIGEST_KEY,
    MEDAL_METRICS,
    draw_calibration,
    draw_curves,
    draw_medal_rates,
    png_text,
    write_plots,
)
from mle_world.audit.stats import MeanSem

SUBPLOT_PARAMS = ("left", "right", "bottom", "top", "wspace", "hspace")
OLD = 10**9  # an mtime no write of this test leaves


def test_plots_are_redrawn_only_when_what_they_show_changes(tmp_path: Path) -> None:
    result = audit(make_sweep(tmp_path / "sweep", 476, events=True, seed=1))
    out = tmp_path / "audit"
    out.mkdir()
    names = write_plots(result.rates, result.world, result.curves, out)
    assert names == ["medal_rates.png", "calibration.png"]
    paths = {name: out / name for name in names}
    for path in paths.values():
        assert png_text(path, DIGEST_KEY) is not None and oct(path.stat().st_mode & 0o777) == "0o644"
        os.utime(path, ns=(OLD, OLD))

    assert write_plots(result.rates, result.world, result.curves, out) == names
    assert all(p.stat().st_mtime_ns == OLD for p in paths.values())  # same inputs: kept

    calibration = paths["calibration.png"].read_bytes()
    paths["calibration.png"].write_bytes(calibration[: len(calibration) // 2])  # a crash mid-write
    os.utime(paths["calibration.png"], ns=(OLD, OLD))
    first = result.rates[0]
    changed = dataclasses.replace(first, rates={**first.rates, "gold_medal": MeanSem(12.5, 1.0, 3)})
    write_plots([changed, *result.rates[1:]], result.world, result.curves, out)
    assert paths["medal_rates.png"].stat().st_mtime_ns != OLD  # a number changed: redrawn
    assert paths["calibration.png"].stat().st_mtime_ns != OLD  # truncated: redrawn whole
    assert paths["calibration.png"].read_bytes() == calibration

    key = png_text(paths["medal_rates.png"], DIGEST_KEY)
    write_plots(result.rates, result.world, result.curves, out)
    assert png_text(paths["medal_rates.png"], DIGEST_KEY) != key  # and back again


def test_margins_fit_the_labels_as_tight_layout_does() -> None:
    """The plots' margins, computed from their texts' sizes, are the ones matplotlib's tight_layout
    finds by laying out the whole figure: nothing is cut off and no space is wasted. Long and slanted
    labels included, and labels too long to fit any margins."""
    rates = {
        "configs": ["a-configuration-with-a-long-name", "aide", "wm-point"],
        "width": 0.4,
        "bars": [
            {"metric": m, "regime": r, "xs": [i - 0.2 + 0.4 * j for i in range(3)], "ys": [98.0, 5.0, 40.0],
             "errs": [2.0, 1.0, 0.5]}
            for m in MEDAL_METRICS for j, r in enumerate(("gated", "ungated"))
        ],
    }  # fmt: skip
    lines = [{"label": "all (n=12)", "xs": [0.05, 0.5, 0.95], "ys": [0.1, 0.4, 0.9], "linewidth": 2}]
    curves = [
        {
            "style": "-",
            "label": "gated/aide (n=3)",
            "times": [0.0, 1.5, 23.0],
            "values": [-1250.5, 3.0, 40000.0],
        }
    ]
    # A name too long for the figure: no margins fit (tight_layout then keeps matplotlib's defaults).
    too_long = {**rates, "configs": ["x" * 200, "aide", "wm-point"]}
    for figure in (
        draw_medal_rates(rates),
        draw_calibration({"lines": lines}),
        draw_curves({"lines": curves}),
        draw_medal_rates(too_long),
    ):
        ours = figure.subplotpars
        fitted = (ours.left, ours.right, ours.bottom, ours.top, ours.wspace)
        # tight_layout measures at the axes' current places (as fit_margins does): start from the same.
        figure.subplots_adjust(**{k: mpl.rcParams[f"figure.subplot.{k}"] for k in SUBPLOT_PARAMS})
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "Tight layout not applied")
            figure.tight_layout()
        tight = figure.subplotpars
        width, height = figure.get_size_inches() * figure.dpi
        scale = (width, width, height, height, width / len(figure.axes))  # wspace: of an axes' width
        expected = (tight.left, tight.right, tight.bottom, tight.top, tight.wspace)
        if len(figure.axes) == 1:  # no gap between axes
            fitted, expected = fitted[:4], expected[:4]
        for ours_value, tight_value, pixels in zip(fitted, expected, scale, strict=False):
            assert abs(ours_value - tight_value) * pixels < 1, (fitted, expected)
