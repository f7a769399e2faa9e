"""Per-trial totals of a sweep's cost CSVs for the audit: cost (known only if every row is), tokens, GPU-hours.

Reads `costs/*.csv` (the per-trial files `costs.account` writes); writes nothing.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterable
from dataclasses import dataclass

from mle_world import layout


@dataclass
class CostTotal:
    """One trial's cost rows summed."""

    cost: float = 0.0
    known: bool = True
    tokens: int = 0
    gpu: float = 0.0


def _cost_names(costs_dir: str) -> list[str]:
    """The per-trial cost CSVs of `costs_dir`, sorted (what `read_cost_rows` reads, in its order)."""
    try:
        with os.scandir(costs_dir) as entries:
            names = sorted(e.name for e in entries if e.name.endswith(".csv") and not e.name.startswith("."))
    except OSError:
        return []
    return [name for name in names if name != layout.COST_SUMMARY]


REQUIRED = frozenset({"trial_id", "role", "cost_usd"})
PLAIN_TEXT_SPECIALS = ('"', "\r", "\0")
"""Without these, a CSV's rows are its lines split on commas (no quoting, one line ending, no NUL)."""


def _add_rows(header: list[str], rows: Iterable[list[str]], totals: dict[str | None, CostTotal]) -> bool:
    """Add rows under `header` to `totals`; False when the header lacks a required column.

    The same cells `costs.summary.read_cost_rows` gives as dicts (blank rows skipped, short rows
    padded with None, a repeated header name keeping its last column), read by column index.
    """
    if not REQUIRED <= set(header):
        return False
    index = {name: i for i, name in enumerate(header)}
    width = len(header)
    at_id, at_cost, at_gpu = index["trial_id"], index["cost_usd"], index.get("gpu_hours")
    at_prompt, at_completion = index.get("prompt_tokens"), index.get("completion_tokens")
    last: object = totals  # no trial id is this object
    total = CostTotal()
    for row in rows:
        if len(row) < width:
            if not row:
                continue
            row = row + [None] * (width - len(row))  # type: ignore[list-item]
        if row[at_id] != last:
            last = row[at_id]
            total = totals.get(row[at_id]) or totals.setdefault(row[at_id], CostTotal())
        cost = row[at_cost]
        if cost:
            total.cost += float(cost)
        else:  # "" or a short row's None
            total.known = False
        if at_prompt is not None and row[at_prompt]:
            total.tokens += int(float(row[at_prompt]))
        if at_completion is not None and row[at_completion]:
            total.tokens += int(float(row[at_completion]))
        if at_gpu is not None and row[at_gpu]:
            total.gpu += float(row[at_gpu])
    return True


def _add_cost_file(path: str, totals: dict[str | None, CostTotal]) -> bool:
    """Add one cost CSV's rows to `totals` (by trial id); False when the file is unreadable.

    The audit reads one such file per trial: a plain file (the usual one) is split on lines and
    commas, which gives the csv module's rows for it; anything else goes through the csv module, read
    as `read_cost_rows` reads it (rows before an undecodable byte still count).
    """
    try:
        with open(path, encoding="utf-8", newline="") as handle:
            text = handle.read()
    except UnicodeDecodeError:
        return _add_cost_file_csv(path, totals)
    except OSError:
        return False
    if any(special in text for special in PLAIN_TEXT_SPECIALS):
        try:
            reader = csv.reader(io.StringIO(text, newline=""))
            header = next(reader, None)
            return header is not None and _add_rows(header, reader, totals)
        except csv.Error:
            return False
    lines = text.split("\n")
    if not lines[0]:  # csv.reader's first row is the first non-blank line: let it decide
        return _add_cost_file_csv(path, totals)
    return _add_rows(lines[0].split(","), (line.split(",") if line else [] for line in lines[1:]), totals)


def _add_cost_file_csv(path: str, totals: dict[str | None, CostTotal]) -> bool:
    try:
        with open(path, encoding="utf-8", newline="") as handle:
            reader = csv.reader(handle)
            header = next(reader, None)
            return header is not None and _add_rows(header, reader, totals)
    except (OSError, csv.Error, UnicodeDecodeError):
        return False


def read_cost_totals(costs_dir: str) -> tuple[dict[str | None, CostTotal], list[str]]:
    """Totals by trial id of every cost CSV in `costs_dir`, and the names of the unreadable files."""
    totals: dict[str | None, CostTotal] = {}
    bad = [name for name in _cost_names(costs_dir) if not _add_cost_file(f"{costs_dir}/{name}", totals)]
    return totals, bad
