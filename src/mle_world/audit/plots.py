"""The audit's plots: medal rates per configuration and regime, world-model calibration, best metric over time.

Reads the computed audit tables; writes `medal_rates.png`, `calibration.png` and
`best_metric_over_time.png` into the audit dir (only those that have data).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from mle_world.audit.analysis import LABELS, Curve, RateRow, WorldRow


def write_plots(
    rates: Sequence[RateRow], world: Sequence[WorldRow], curves: Sequence[Curve], out_dir: Path
) -> list[str]:
    """Write the PNGs that have data; returns their file names."""
    # Figure without pyplot: no backend selection or global figure registry to import (Agg renders PNGs).
    from matplotlib.figure import Figure

    written: list[str] = []
    rates = [r for r in rates if r.rates["any_medal"].mean is not None]
    if rates:
        configs = sorted({r.configuration for r in rates})
        regimes = sorted({r.regime for r in rates})
        metrics = ("any_medal", "gold_medal", "silver_medal", "bronze_medal")
        fig = Figure(figsize=(4 * len(metrics), 3.8))
        axes = fig.subplots(1, len(metrics), sharey=True)
        width = 0.8 / max(1, len(regimes))
        for ax, metric in zip(axes, metrics, strict=True):
            for j, regime in enumerate(regimes):
                xs, ys, errs = [], [], []
                for i, cfg in enumerate(configs):
                    row = next((r for r in rates if r.regime == regime and r.configuration == cfg), None)
                    if row is None or row.rates[metric].mean is None:
                        continue
                    xs.append(i + (j - (len(regimes) - 1) / 2) * width)
                    ys.append(row.rates[metric].mean)
                    errs.append(row.rates[metric].sem or 0.0)
                ax.bar(xs, ys, width=width, yerr=errs, capsize=3, label=regime)
            ax.set_title(LABELS[metric])
            ax.set_xticks(range(len(configs)))
            ax.set_xticklabels(configs, rotation=45, ha="right", fontsize=8)
        axes[0].set_ylabel("% of tasks (mean ± SEM over seeds)")
        axes[0].legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out_dir / "medal_rates.png", dpi=120)
        written.append("medal_rates.png")
    calibrated = [w for w in world if w.bins]
    if calibrated:
        fig = Figure(figsize=(4.8, 4.5))
        ax = fig.subplots()
        ax.plot([0, 1], [0, 1], "k--", linewidth=1, label="perfect")
        for w in calibrated:
            pts = [
                (b.mean_predicted, b.observed_rate)
                for b in w.bins
                if b.mean_predicted is not None and b.observed_rate is not None
            ]
            if pts:
                label = f"{w.configuration} (n={w.labelled})"
                ax.plot([p for p, _ in pts], [o for _, o in pts], marker="o", linewidth=2 if w.configuration == "all" else 1, label=label)  # fmt: skip
        ax.set_xlabel("predicted p_improves")
        ax.set_ylabel("observed improvement rate")
        ax.set_title("World-model calibration (ungated)")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out_dir / "calibration.png", dpi=120)
        written.append("calibration.png")
    if curves:
        fig = Figure(figsize=(6.4, 4.2))
        ax = fig.subplots()
        for c in curves:
            style = "-" if c.regime == "gated" else "--"
            ax.plot(c.times, c.values, style, label=f"{c.regime}/{c.configuration} (n={c.trials})")
        ax.set_xlabel("hours since first node (steps when the journal has no times)")
        ax.set_ylabel("best metric so far (normalised per task)")
        ax.set_title("Best metric over time")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out_dir / "best_metric_over_time.png", dpi=120)
        written.append("best_metric_over_time.png")
    return written
