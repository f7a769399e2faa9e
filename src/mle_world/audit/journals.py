"""A trial's journal as the audit reads it: tolerant, its best-metric curve, and the summary the audit keeps of
it (the whole journal is read again for the trial's page, never held for the sweep), encoded for the trial's
digest and the parsed-inputs cache.

Reads `<trial>/journal.json` and `journal.jsonl`; writes nothing.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from mle_world.agent import load_journal_data
from mle_world.audit.trial_records import ABSENT, NO_JOURNAL, JournalSummary, Trial
from mle_world.layout import JOURNAL, JOURNAL_LOG
from mle_world.storage import read_regular, text_of


def trial_journal(trial: Trial) -> Any:
    """The trial's journal (journal.json + journal.jsonl) as parsed JSON, or None when absent or corrupt.

    Read at each call (the trial's page reads it; the tables keep only `journal_summary`).
    """
    return _read_journal(trial)


def journal_summary(trial: Trial) -> JournalSummary:
    """The trial's `JournalSummary`, from its journal read on first use."""
    cached = trial.journal_cache
    if cached is None:
        cached = trial.journal_cache = summary_of(_read_journal(trial))
    return cached


def read_summary(path: str) -> JournalSummary:
    """The `JournalSummary` of the journal.json at `path` read alone (a trial that left no journal.jsonl)."""
    try:
        data = read_regular(path)
    except OSError:  # as `_read_journal`
        return ABSENT
    return summary_of_bytes(data)


def summary_of_bytes(data: bytes) -> JournalSummary:
    """`read_summary` of journal.json's bytes, read as `load_journal_data` reads them."""
    try:
        return summary_of(json.loads(text_of(data)))
    except ValueError:  # not UTF-8 (a UnicodeDecodeError is a ValueError) or not JSON
        return ABSENT


def encode(summary: JournalSummary) -> Any:
    """A summary as JSON; None when a curve point would not survive it (not kept: read again next time)."""
    if not all(math.isfinite(t) and math.isfinite(m) for t, m in summary.curve):
        return None
    curve = [[t, m] for t, m in summary.curve]
    return [list(summary.cells), curve, summary.lower, summary.has_nodes, summary.present]


def decode(data: Any) -> JournalSummary:
    """`encode`'s JSON as a summary again; raises TypeError or ValueError for any other shape."""
    cells, curve, lower, has_nodes, present = data
    if type(cells) is not list or len(cells) != 5 or any(type(c) is not str for c in cells):
        raise TypeError("not the journal's cells")
    if (
        (lower is not None and type(lower) is not bool)
        or type(has_nodes) is not bool
        or type(present) is not bool
    ):
        raise TypeError("not a direction or flag")
    points = [(float(t), float(m)) for t, m in curve]
    return JournalSummary(
        (cells[0], cells[1], cells[2], cells[3], cells[4]), points, lower, has_nodes, present
    )


def summary_of(data: Any) -> JournalSummary:
    """The `JournalSummary` of a journal's parsed JSON (None: no journal)."""
    if data is None:
        return ABSENT
    curve, lower = curve_of(data)
    nodes = data.get("nodes") if isinstance(data, dict) else None
    return JournalSummary(cells_of(data), curve, lower, isinstance(nodes, list) and bool(nodes), True)


def cells_of(journal: Any) -> tuple[str, str, str, str, str]:
    """The trial table's journal cells: nodes, executed, skipped, buggy, best metric."""
    nodes = journal.get("nodes") if isinstance(journal, dict) else None
    if not isinstance(nodes, list):
        return NO_JOURNAL
    good = [n for n in nodes if isinstance(n, dict) and n.get("executed") and not n.get("is_buggy")]
    metrics = [n["metric"] for n in good if isinstance(n.get("metric"), int | float)]
    lower = journal.get("lower_is_better")
    best = (min(metrics) if lower else max(metrics)) if metrics else None
    return (
        str(len(nodes)),
        str(sum(1 for n in nodes if isinstance(n, dict) and n.get("executed"))),
        str(sum(1 for n in nodes if isinstance(n, dict) and n.get("skipped"))),
        str(sum(1 for n in nodes if isinstance(n, dict) and n.get("executed") and n.get("is_buggy"))),
        "" if best is None else f"{best:.4g}",
    )


def _read_journal(trial: Trial) -> Any:
    # The listing first: most calls at 100,000 trials were for trials it shows have no journal.
    if not (trial.may_have(JOURNAL) or trial.may_have(JOURNAL_LOG)):
        return None
    snapshot = trial.file(JOURNAL)
    try:
        if trial.files is None and not (os.path.exists(snapshot) or os.path.exists(trial.file(JOURNAL_LOG))):
            return None  # cheaper than load_journal_data's Path checks
        return load_journal_data(Path(snapshot))
    except (OSError, ValueError):
        return None


def curve_of(data: Any) -> tuple[list[tuple[float, float]], bool | None]:
    """(hours since the first node, metric) of good executed nodes in a journal's parsed JSON
    (`trial_journal`), and direction.

    Tolerant: an absent or corrupt journal gives an empty curve. Times come from the node's budget
    clock (`budget_time_s`), else from `ctime` (older journals); without times the node's step
    stands in for hours.
    """
    try:
        nodes = data["nodes"]
    except (KeyError, TypeError):
        return [], None
    points: list[tuple[float, float]] = []
    ctimes = [float(n.get("ctime") or 0.0) for n in nodes if isinstance(n, dict)]
    origin = min((c for c in ctimes if c > 0), default=0.0)
    for index, node in enumerate(nodes):
        if not isinstance(node, dict) or node.get("is_buggy") or not node.get("executed", True):
            continue
        metric = node.get("metric")
        if isinstance(metric, dict):
            metric = metric.get("value")
        if not isinstance(metric, int | float) or isinstance(metric, bool) or metric != metric:
            continue
        budget = node.get("budget_time_s")
        ctime = float(node.get("ctime") or 0.0)
        if isinstance(budget, int | float) and not isinstance(budget, bool):
            # The trial's budget clock: carried over resumes, so a requeue gap is not counted.
            hours = float(budget) / 3600.0
        elif origin > 0 and ctime > 0:
            hours = (ctime - origin) / 3600.0
        else:
            hours = float(node.get("step", index))
        points.append((hours, float(metric)))
    lower = data.get("lower_is_better") if isinstance(data, dict) else None
    return sorted(points), lower if isinstance(lower, bool) else None
