"""Each trial's cost totals for the audit: from its digest's entry for its own cost CSV while that file is
unchanged, and from the rest of `costs/*.csv` read and summed in file order.

Reads `costs/*.csv` (the per-trial files `costs.account` writes) and the cost entries of the trials' digests;
writes nothing. How a file's rows are parsed and summed is `audit/cost_totals.py`'s (a parser the digests
record): this module only decides which files to read.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from mle_world import layout
from mle_world.audit.cache import ParsedInputs, stamp_of
from mle_world.audit.cost_totals import CostTotal, add_rows, cost_file_of, decode, encode, parse_cost_file
from mle_world.audit.digest import COST
from mle_world.audit.trial_records import Trial


def cost_names(costs_dir: str, skip: Collection[str] = ()) -> list[str]:
    """The per-trial cost CSVs of `costs_dir` but those named in `skip`, sorted (what `read_cost_rows`
    reads, in its order). Those skipped are never sorted: at 100,000 reports, each taken with its trial,
    sorting them was half of this."""
    try:
        listed = os.listdir(costs_dir)
    except OSError:
        return []
    names = sorted(n for n in listed if n not in skip and n.endswith(".csv") and not n.startswith("."))
    return [name for name in names if name != layout.COST_SUMMARY]


def read_cost_totals(
    costs_dir: str, parsed: ParsedInputs | None = None, skip: Collection[str] = ()
) -> tuple[dict[str | None, CostTotal], list[str]]:
    """Totals by trial id of every cost CSV in `costs_dir` but those named in `skip`, and the names of the
    unreadable files.

    `parsed`: files an earlier audit parsed, used while unchanged.
    """
    totals: dict[str | None, CostTotal] = {}
    bad = []
    offered = None if parsed is None else parsed.offered.get("cost")
    for name in cost_names(costs_dir, skip):
        path = f"{costs_dir}/{name}"
        if parsed is None:
            cost_file = parse_cost_file(path)
        else:
            # A trial digest's entry for the file goes to `get` directly (tried first), freed either way.
            entry = offered.pop(path, None) if offered else None
            cost_file = parsed.get("cost", path, parse_cost_file, encode, decode, cost_file_of, entry)
        if cost_file.total is not None:
            trial_id, total = cost_file.total
            if trial_id not in totals:
                totals[trial_id] = total
                if not cost_file.readable:
                    bad.append(name)
                continue
            cost_file = parse_cost_file(path)  # the rows, to add to the trial's total in order
        add_rows(cost_file.rows, totals)
        if not cost_file.readable:
            bad.append(name)
    return totals, bad


def take_total(trial: Trial, parsed: ParsedInputs, path: str, entry: Any, at: int | None, name: str) -> bool:
    """Put on `trial` the cost total of its digest's `entry` for its own cost CSV at `path` (`name` in the
    dir whose fd is `at`), when the file still has the entry's stamp (recorded by `parsed.took`, as `get`
    records it) and its rows are that trial's alone, readable to the end; False otherwise (`attach_costs` reads it).

    At 100,000 reports, each file's entry matched through `costs/`' listing and the totals mapped back to
    their trials by id took 0.4 s of CPU more.
    """
    if type(entry) is not list or len(entry) != 2:
        return False
    stamp = stamp_of(path, at, name)
    if stamp is None or entry[0] != stamp:
        return False
    try:
        cost_file = decode(entry[1])
    except (TypeError, ValueError, KeyError, IndexError):
        return False
    if cost_file.total is None or not cost_file.readable or cost_file.total[0] != trial.trial_id:
        return False
    _attach(trial, cost_file.total[1])
    parsed.took(COST, path, entry[0])
    return True


def _attach(trial: Trial, total: CostTotal) -> None:
    trial.has_costs = True
    trial.cost_known = total.known
    trial.cost_usd = total.cost if total.known else None
    trial.tokens = total.tokens if total.tokens_known else None
    trial.gpu_hours = total.gpu if total.gpu_known else None


def attach_costs(
    trials: Sequence[Trial],
    dirs: Sequence[Path],
    parsed: ParsedInputs | None = None,
    taken: dict[str, dict[str, str]] | None = None,
) -> list[str]:
    """Per-trial totals from each dir's costs/*.csv: cost, tokens and GPU-hours, each None unless every row
    knows it; the problems (unreadable cost CSVs).

    `taken`: by costs dir (as a string), the CSVs whose totals `take_total` put on their trials (name → trial
    id): not read. Should another file have rows of such a trial, its own CSV is read too, so that the trial's
    rows add up in file order, as they always have.
    """
    problems: list[str] = []
    by_id: dict[str | None, Trial] | None = None
    for output_dir in dirs:
        costs_dir = layout.costs_dir(output_dir)
        if not costs_dir.is_dir():
            continue
        skip = taken.get(str(costs_dir), {}) if taken else {}
        totals, bad = read_cost_totals(str(costs_dir), parsed, skip)
        if skip and totals:
            both = set(totals).intersection(skip.values())
            if both:
                totals, bad = read_cost_totals(
                    str(costs_dir), parsed, {name for name, trial in skip.items() if trial not in both}
                )
        problems.extend(f"{costs_dir / name}: unreadable cost CSV" for name in bad)
        if totals and by_id is None:
            by_id = {t.trial_id: t for t in trials}
        for trial_id, total in totals.items():
            trial = None if by_id is None else by_id.get(trial_id)
            if trial is None or (trial.output_dir is not output_dir and trial.output_dir != output_dir):
                continue
            _attach(trial, total)
    return problems
