"""A cost CSV's rows and their per-trial totals for the audit: cost, tokens and GPU-hours, each known only if
every row that carries it is.

Reads one cost CSV at a time (the per-trial files `costs.account` writes in `costs/`); writes nothing.
`audit/sweep_costs.py` reads a sweep's: this module is one of the parsers a trial's digest records
(`digest.parsers_digest`), so it holds what a digest's cost entry is made of and nothing else.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import islice
from typing import Any, NamedTuple

from mle_world.storage import read_stamped


@dataclass
class CostTotal:
    """One trial's cost rows summed; `known`, `tokens_known`, `gpu_known`: no row left that one unknown."""

    cost: float = 0.0
    known: bool = True
    tokens: int = 0
    gpu: float = 0.0
    tokens_known: bool = True
    gpu_known: bool = True


REQUIRED = frozenset({"trial_id", "role", "cost_usd"})
EXECUTION = "execution"
"""The row of a trial's executions: its GPU-hours are the trial's; it has no tokens (empty cells)."""
PLAIN_TEXT_SPECIALS = ('"', "\r", "\0")
"""Without these, a CSV's rows are its lines split on commas (no quoting, one line ending, no NUL)."""


class CostLine(NamedTuple):
    """One row's part of its trial's totals; None: unknown (an empty cell, or one that is no finite number).

    `tokens` (prompt + completion) is unknown when an LLM role's row lacks one (`costs.account` leaves both
    empty when no call reported usage, or the trial has no events.jsonl); the execution row has none and
    adds 0. `gpu` is unknown when the execution row lacks it (no events.jsonl); other rows add their cell
    or 0.
    """

    trial_id: str | None
    cost: float | None
    tokens: int | None
    gpu: float | None


class CostFile(NamedTuple):
    """The rows of one cost CSV, and whether it was readable to its end (its rows count either way).

    Taken from a re-audit's kept entry, a file of one trial's rows (the harness writes one per trial)
    has its `total` instead: those rows summed in order from zero, as `add_rows` sums them into a
    trial's first file; its rows are read again if another file has rows of the same trial.
    """

    readable: bool
    rows: list[CostLine]
    total: tuple[str | None, CostTotal] | None = None


class Columns(NamedTuple):
    """Where a header puts the cells a row's totals need (None: no such column)."""

    width: int
    trial_id: int
    role: int
    cost: int
    prompt: int | None
    completion: int | None
    gpu: int | None


def _columns(header: list[str]) -> Columns | None:
    """The columns of `header`; None when it lacks a required one (a repeated name: its last column)."""
    if not REQUIRED <= set(header):
        return None
    index = {name: i for i, name in enumerate(header)}
    return Columns(
        len(header),
        index["trial_id"],
        index["role"],
        index["cost_usd"],
        index.get("prompt_tokens"),
        index.get("completion_tokens"),
        index.get("gpu_hours"),
    )


_HEADERS: dict[str, Columns | None] = {}
"""`_columns` of each plain header line seen (the harness writes one; bounded for odd files)."""


def _finite(cell: str | None) -> float | None:
    """A cell as a finite number; None when empty, not a number, or not finite (unknown)."""
    if not cell:
        return None
    try:
        value = float(cell)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def cost_row(
    trial_id: str | None,
    role: str | None,
    cost: str | None,
    prompt: str | None,
    completion: str | None,
    gpu: str | None,
) -> CostLine:
    """One row's cells as its part of the trial's totals (see `CostLine` for what is unknown)."""
    if role == EXECUTION:
        tokens: int | None = int(_finite(prompt) or 0) + int(_finite(completion) or 0)
        hours = _finite(gpu)
    else:
        p, c = _finite(prompt), _finite(completion)
        tokens = int(p) + int(c) if p is not None and c is not None else None
        hours = _finite(gpu) if gpu else 0.0
    return CostLine(trial_id, _finite(cost), tokens, hours)


def _rows(header: list[str], rows: Iterable[list[str]], out: list[CostLine]) -> bool:
    """Append the rows under `header` to `out`; False when the header lacks a required column.

    The same cells `costs.summary.read_cost_rows` gives as dicts (blank rows skipped, short rows
    padded with None, a repeated header name keeping its last column), read by column index.
    """
    columns = _columns(header)
    if columns is None:
        return False
    width, at_id, at_role, at_cost, at_prompt, at_completion, at_gpu = columns
    for row in rows:
        if len(row) < width:
            if not row:
                continue
            row = row + [None] * (width - len(row))  # type: ignore[list-item]
        prompt = row[at_prompt] if at_prompt is not None else None
        completion = row[at_completion] if at_completion is not None else None
        gpu = row[at_gpu] if at_gpu is not None else None
        out.append(cost_row(row[at_id], row[at_role], row[at_cost], prompt, completion, gpu))
    return True


def _plain_rows(lines: list[str], columns: Columns, out: list[CostLine]) -> bool:
    """`_rows` of a plain file's lines in one loop, for a header with every column (its usual shape);
    False (nothing appended) for another header."""
    width, at_id, at_role, at_cost, at_prompt, at_completion, at_gpu = columns
    if at_prompt is None or at_completion is None or at_gpu is None:
        return False
    for line in islice(lines, 1, None):
        if not line:
            continue
        row: list[Any] = line.split(",")
        if len(row) < width:
            row += [None] * (width - len(row))
        out.append(
            cost_row(row[at_id], row[at_role], row[at_cost], row[at_prompt], row[at_completion], row[at_gpu])
        )
    return True


def parse_cost_file(path: str) -> CostFile:
    """One cost CSV's rows.

    The audit reads one such file per trial: a plain file (the usual one) is split on lines and
    commas, which gives the csv module's rows for it; anything else goes through the csv module, read
    as `read_cost_rows` reads it (rows before an undecodable byte still count).
    """
    got = read_stamped(path)
    if got is not None:
        parsed = cost_file_of(got[0])
        if parsed is not None:
            return parsed
    try:
        with open(path, encoding="utf-8", newline="") as handle:
            text = handle.read()
    except UnicodeDecodeError:
        return _parse_with_csv(path)
    except OSError:
        return CostFile(False, [])
    return _parse_text(text)


def cost_file_of(data: bytes) -> CostFile | None:
    """The rows of a cost CSV's bytes; None when they are not UTF-8 (`parse_cost_file` reads the file then)."""
    try:
        text = data.decode("utf-8")  # the csv module reads with newline="": no newline translation
    except UnicodeDecodeError:
        return None
    return _parse_text(text)


def _parse_text(text: str) -> CostFile:
    rows: list[CostLine] = []
    lines = text.split("\n")
    if not lines[0] or '"' in text or "\r" in text or "\0" in text:  # PLAIN_TEXT_SPECIALS, inline
        # csv.reader's first row is the first non-blank line: let it decide (and read what is quoted)
        try:
            reader = csv.reader(io.StringIO(text, newline=""))
            header = next(reader, None)
            return CostFile(header is not None and _rows(header, reader, rows), rows)
        except csv.Error:
            return CostFile(False, rows)
    head = lines[0]
    columns = _HEADERS.get(head)
    if columns is None:
        columns = _columns(head.split(","))
        if len(_HEADERS) < 64:
            _HEADERS[head] = columns
    if columns is None:
        return CostFile(False, rows)
    if not _plain_rows(lines, columns, rows):
        _rows(head.split(","), (line.split(",") if line else [] for line in lines[1:]), rows)
    return CostFile(True, rows)


def _parse_with_csv(path: str) -> CostFile:
    rows: list[CostLine] = []
    try:
        with open(path, encoding="utf-8", newline="") as handle:
            reader = csv.reader(handle)
            header = next(reader, None)
            return CostFile(header is not None and _rows(header, reader, rows), rows)
    except (OSError, csv.Error, UnicodeDecodeError):
        return CostFile(False, rows)


def add_rows(rows: Iterable[CostLine], totals: dict[str | None, CostTotal]) -> None:
    """Sum rows into `totals` by trial id, row by row (the float sums of read_cost_rows' order)."""
    for trial_id, cost, tokens, gpu in rows:
        total = totals.get(trial_id)
        if total is None:
            total = totals[trial_id] = CostTotal()
        if cost is None:
            total.known = False
        else:
            total.cost += cost
        if tokens is None:
            total.tokens_known = False
        else:
            total.tokens += tokens
        if gpu is None:
            total.gpu_known = False
        else:
            total.gpu += gpu


JSON_INT = 1 << 63
"""orjson writes integers of 64 bits only; a token count of "1e30" is summed past that."""


def _survives_json(cost: float | None, tokens: int | None, gpu: float | None) -> bool:
    finite = math.isfinite
    return (
        (cost is None or finite(cost))
        and (gpu is None or finite(gpu))
        and (tokens is None or -JSON_INT <= tokens < JSON_INT)
    )


def encode(parsed: CostFile) -> Any:
    """A CostFile as JSON (None when a number would not survive JSON: not kept): the rows' trial id
    and total when they are one trial's (see `CostFile.total`), else the rows.

    Kept as the total, a re-audit decodes no row: the 10,000 cost CSVs of benchmarks/audit.py's sweep
    took 0.083 s of CPU from kept rows, 0.064-0.076 s from kept totals (read_cost_totals, medians of 5,
    two runs each, load ~6), and their entries shrink from 3.36 to 1.99 MB.
    """
    rows = parsed.rows
    if not all(_survives_json(cost, tokens, gpu) for _, cost, tokens, gpu in rows):
        return None
    if rows and all(row.trial_id == rows[0].trial_id for row in rows):
        totals: dict[str | None, CostTotal] = {}
        add_rows(rows, totals)
        (trial_id, t), *_ = totals.items()
        if _survives_json(t.cost, t.tokens, t.gpu):
            return [
                parsed.readable,
                trial_id,
                [t.cost, t.known, t.tokens, t.gpu, t.tokens_known, t.gpu_known],
            ]
    return [parsed.readable, list(map(list, rows))]


def decode(data: Any) -> CostFile:
    if len(data) == 3:
        readable, trial_id, (cost, known, tokens, gpu, tokens_known, gpu_known) = data
        if type(trial_id) is not str and trial_id is not None:
            raise TypeError("not a trial id")
        total = CostTotal(
            float(cost), bool(known), int(tokens), float(gpu), bool(tokens_known), bool(gpu_known)
        )
        return CostFile(bool(readable), [], (trial_id, total))
    readable, rows = data
    return CostFile(bool(readable), [CostLine(*row) for row in rows])
