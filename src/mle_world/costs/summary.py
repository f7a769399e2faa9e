"""The per-sweep cost summary: every trial's cost CSV summed per regime x configuration x role.

Reads `costs/*.csv` (and, for `cost_output_dir`, `runs/*/*/spec.json` and events); writes
`costs/summary.csv` (atomically).
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mle_world import layout
from mle_world.costs.account import COUNTED, Amounts, csv_text, write_trial_costs
from mle_world.costs.prices import Prices
from mle_world.records import TrialSpec
from mle_world.storage import Unreadable, load_record, write_text_atomic


class CostSummaryRow(Amounts):
    """One line of `costs/summary.csv`: a regime x configuration x role summed over its trials.

    `cost_usd` is empty when any trial's cost in the group is unknown.
    """

    regime: str
    configuration: str
    role: str
    trials: int
    trials_cost_unknown: int = 0


SUMMARY_COLUMNS: tuple[str, ...] = (
    *("regime", "configuration", "role", "trials"),
    *COUNTED,
    *("cost_usd", "trials_cost_unknown"),
)
_COUNTS = tuple(c for c in COUNTED if Amounts.model_fields[c].annotation == int | None)
_SECONDS = tuple(c for c in COUNTED if c not in _COUNTS)


@dataclass
class _Group:
    trials: set[str] = field(default_factory=set)
    sums: dict[str, float | int | None] = field(default_factory=lambda: dict.fromkeys((*_COUNTS, *_SECONDS)))
    cost: float = 0.0
    cost_unknown: int = 0


def _num(cell: str | None) -> float | None:
    """A cell as a finite number; None (unknown) when empty, no number, or inf/nan (as the audit reads it)."""
    if cell is None or cell == "":
        return None
    try:
        value = float(cell)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _as_dicts(header: list[str], reader: Iterable[list[str]]) -> Iterator[dict[str, Any]]:
    """What csv.DictReader yields (blank rows skipped, short rows padded with None, extras under None),
    without its per-row overhead."""
    width = len(header)
    for row in reader:
        if not row:
            continue
        if len(row) == width:
            yield dict(zip(header, row, strict=True))
            continue
        out: dict[Any, Any] = dict(zip(header, row, strict=False))
        if len(row) < width:
            out.update(dict.fromkeys(header[len(row) :]))
        else:
            out[None] = row[width:]
        yield out


def read_cost_rows(costs_dir: Path) -> tuple[list[dict[str, str]], list[str]]:
    """Rows of every per-trial CSV in `costs_dir` and the names of unreadable files."""
    rows: list[dict[str, str]] = []
    bad: list[str] = []
    try:
        with os.scandir(costs_dir) as entries:  # one listing; names sorted as glob's paths were
            names = sorted(e.name for e in entries if e.name.endswith(".csv") and not e.name.startswith("."))
    except OSError:
        names = []
    for name in names:
        if name == layout.COST_SUMMARY:
            continue
        try:
            with open(os.path.join(costs_dir, name), encoding="utf-8", newline="") as handle:
                reader = csv.reader(handle)
                header = next(reader, None)
                if header is None or not {"trial_id", "role", "cost_usd"} <= set(header):
                    bad.append(name)
                    continue
                rows.extend(_as_dicts(header, reader))
        except (OSError, csv.Error, UnicodeDecodeError):
            bad.append(name)
    return rows, bad


def summarise_cost_rows(rows: Iterable[Mapping[str, str]]) -> list[CostSummaryRow]:
    """Sum per regime x configuration x role; cost is empty when any trial's cost is unknown."""
    groups: dict[tuple[str, str, str], _Group] = {}
    for row in rows:
        key = (row.get("regime", ""), row.get("configuration", ""), row.get("role", ""))
        group = groups.setdefault(key, _Group())
        group.trials.add(row.get("trial_id", ""))
        for column in (*_COUNTS, *_SECONDS):
            value = _num(row.get(column))
            if value is not None and (column not in _COUNTS or math.isfinite(value)):
                group.sums[column] = (group.sums[column] or 0) + (int(value) if column in _COUNTS else value)
        cost = _num(row.get("cost_usd"))
        if cost is None:
            group.cost_unknown += 1
        else:
            group.cost += cost
    return [
        CostSummaryRow(
            regime=key[0],
            configuration=key[1],
            role=key[2],
            trials=len(group.trials),
            cost_usd=None if group.cost_unknown else group.cost,
            trials_cost_unknown=group.cost_unknown,
            **group.sums,
        )
        for key, group in sorted(groups.items())
    ]


def write_cost_summary(output_dir: Path) -> Path:
    """Write `costs/summary.csv` from every per-trial CSV in `costs/`."""
    costs_dir = layout.costs_dir(output_dir)
    rows, _ = read_cost_rows(costs_dir) if costs_dir.is_dir() else ([], [])
    path = layout.cost_summary_path(output_dir)
    write_text_atomic(path, csv_text(SUMMARY_COLUMNS, summarise_cost_rows(rows)))
    return path


def cost_output_dir(output_dir: Path, prices: Prices) -> list[Path]:
    """Rewrite the cost CSV of every trial under `runs/*/*/spec.json`, then `costs/summary.csv`.

    Trials whose spec.json is unreadable are skipped. Returns the files written.
    """
    written: list[Path] = []
    for spec_path in layout.spec_paths(output_dir):
        spec = load_record(spec_path, TrialSpec)
        if isinstance(spec, Unreadable):
            continue
        written.append(write_trial_costs(spec_path.parent, spec, output_dir, prices))
    written.append(write_cost_summary(output_dir))
    return written
