"""The audit's PNGs are drawn again only when what they show changes: a PNG carrying the digest of the same
inputs is kept, a changed number, a truncated or foreign PNG is redrawn.

Reads nothing; writes a small synthetic sweep and its plots under tmp_path.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from synthetic import make_sweep

from mle_world.audit import audit
from mle_world.audit.plots import DIGEST_KEY, png_text, write_plots
from mle_world.audit.stats import MeanSem

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
