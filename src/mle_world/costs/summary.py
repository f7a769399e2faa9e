"""The per-sweep cost summary: every trial's cost CSV summed per regime x configuration x role.

Reads `costs/*.csv` (and, for `cost_output_dir`, `runs/*/*/spec.json` and events); writes
`costs/summary.csv` (atomically).
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mle_world import layout
from mle_world.costs.account import _csv_text, write_trial_costs
from mle_world.costs.prices import Prices
from mle_world.records import TrialSpec
from mle_world.storage import read_model, write_text_atomic

SUMMARY_COLUMNS: tuple[str, ...] = (
    "regime",
    "configuration",
    "role",
    "trials",
    "calls",
    "calls_unknown_usage",
    "prompt_tokens",
    "completion_tokens",
    "llm_seconds",
    "exec_seconds",
    "gpu_hours",
    "cost_usd",
    "trials_cost_unknown",
)


def _num(cell: str | None) -> float | None:
    if cell is None or cell == "":
        return None
    try:
        return float(cell)
    except ValueError:
        return None


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


def summarise_cost_rows(rows: Iterable[Mapping[str, str]]) -> list[dict[str, Any]]:
    """Sum per regime x configuration x role; cost is empty when any trial's cost is unknown."""
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    numeric = ("calls", "calls_unknown_usage", "prompt_tokens", "completion_tokens")
    floats = ("llm_seconds", "exec_seconds", "gpu_hours")
    for row in rows:
        key = (row.get("regime", ""), row.get("configuration", ""), row.get("role", ""))
        group = groups.setdefault(
            key,
            {
                "regime": key[0],
                "configuration": key[1],
                "role": key[2],
                "trials": set(),
                **{c: None for c in (*numeric, *floats)},
                "cost_usd": 0.0,
                "trials_cost_unknown": 0,
            },
        )
        group["trials"].add(row.get("trial_id", ""))
        for column in (*numeric, *floats):
            value = _num(row.get(column))
            if value is not None:
                group[column] = (group[column] or 0) + (int(value) if column in numeric else value)
        cost = _num(row.get("cost_usd"))
        if cost is None:
            group["trials_cost_unknown"] += 1
        else:
            group["cost_usd"] += cost
    out = []
    for key in sorted(groups):
        group = groups[key]
        group["trials"] = len(group["trials"])
        if group["trials_cost_unknown"]:
            group["cost_usd"] = None
        out.append(group)
    return out


def write_cost_summary(output_dir: Path) -> Path:
    """Write `costs/summary.csv` from every per-trial CSV in `costs/`."""
    costs_dir = layout.costs_dir(output_dir)
    rows, _ = read_cost_rows(costs_dir) if costs_dir.is_dir() else ([], [])
    path = layout.cost_summary_path(output_dir)
    write_text_atomic(path, _csv_text(SUMMARY_COLUMNS, summarise_cost_rows(rows)))
    return path


def cost_output_dir(output_dir: Path, prices: Prices) -> list[Path]:
    """Rewrite the cost CSV of every trial under `runs/*/*/spec.json`, then `costs/summary.csv`.

    Trials whose spec.json is unreadable are skipped. Returns the files written.
    """
    written: list[Path] = []
    for spec_path in layout.spec_paths(output_dir):
        try:
            spec = read_model(spec_path, TrialSpec)
        except (OSError, ValueError, ValidationError):
            continue
        written.append(write_trial_costs(spec_path.parent, spec, output_dir, prices))
    written.append(write_cost_summary(output_dir))
    return written
