"""A trial's audit digest: what the audit reads of the trial's files — its dir's listing, grading report,
status.json, result.json, events.jsonl parsed, cost CSV parsed and its journal's summary — read once when the
trial ended, each with the stamp of the bytes read, so that a first audit reads one small file per trial and
stats the rest.

Reads a trial's dir, report, status.json, result.json, events.jsonl, journal.json and cost CSV; writes
`runs/<configuration>/<task>_seed<seed>_audit-digest.json` beside the trial dir (atomically). The audit finds
and reads it (and the configuration's gathered digests) through `audit/digest_files.py`.

Its entries are the parsed-inputs cache's (`audit/cache.py`): the same parse, the same encoding (status.json
and result.json as the text the audit validates, as it would read it from the file; the grading report's
values once validated, or its text when it is invalid), the stamp taken from the open file
(or, for the dir, before it was listed). The audit hands them to that cache beside what an earlier audit
kept (it does not keep them again), so each is used only while its file or dir has that stamp (size,
inode, modification and change time: a trial run again, a report graded again, costs accounted again, a
file added to the trial dir, a dir copied elsewhere all show), and the whole digest only while the code
that made them is the audit's own (`parsers_digest`). Written by the harness once the trial's
status.json says how it ended (and again when it is graded later), beside the trial dir, where the
agent's generated code cannot reach, and outside it, so that writing it does not change the dir's stamp;
plain JSON, so a digest someone edits can make the audit wrong as an edited events.jsonl can, but never
runs anything.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path
from typing import Any

import orjson

from mle_world import layout
from mle_world.audit.cache import PARSERS, code_digest, stamp_of
from mle_world.audit.cost_totals import cost_file_of
from mle_world.audit.cost_totals import encode as encode_costs
from mle_world.audit.journals import encode as encode_journal
from mle_world.audit.journals import summary_of_bytes
from mle_world.audit.predictions import encode as encode_events
from mle_world.audit.predictions import predictions_of
from mle_world.audit.report_view import entry_of as report_entry
from mle_world.storage import read_stamped, text_of, write_bytes_atomic

DIR, REPORT, STATUS, RESULT, EVENTS, COST, JOURNAL = (
    "dir",
    "report",
    "status",
    "result",
    "events",
    "cost",
    "journal",
)
"""The kinds of entry, as the parsed-inputs cache names them."""
RECORDS = ((STATUS, layout.STATUS), (RESULT, layout.RESULT))
"""The trial dir's records a digest holds as text (kind, file name)."""


@cache
def parsers_digest() -> str:
    """Digest of the code that made a digest's entries: the parsers and this writer, not the rest of the
    audit (whose changes would otherwise drop the digest of every trial that ever ran; it is written only
    once). Not the cache that reads them either: it uses an entry only when its stamp and shape match."""
    return code_digest((*PARSERS, "digest.py"))


def _listing(trial_dir: Path) -> list[Any] | None:
    """[stamp, sorted names] of `trial_dir`, the stamp taken before listing (a change after it shows)."""
    stamp = stamp_of(str(trial_dir))
    if stamp is None:
        return None
    try:
        names = sorted(os.listdir(trial_dir))
    except OSError:
        return None
    return [stamp, names]


def journal_alone(listed: list[Any] | None) -> bool:
    """Whether a trial dir's listing ([stamp, names]) has a journal.json and no journal.jsonl: its summary is
    then journal.json's alone (a log's lines would add nodes; a trial that ended compacted them)."""
    return listed is not None and layout.JOURNAL in listed[1] and layout.JOURNAL_LOG not in listed[1]


def _record_text(path: Path) -> list[Any] | None:
    """[stamp, text] of a record as `storage.load_record` reads it (strict UTF-8); None when it cannot."""
    got = read_stamped(str(path))
    if got is None:
        return None
    try:
        return [got[1], got[0].decode("utf-8")]
    except UnicodeDecodeError:
        return None


def write_trial_digest(trial_dir: Path, cost_csv: Path | None) -> Path | None:
    """Read the trial's dir, report, records, events.jsonl and `cost_csv` as the audit does and keep them in
    its digest; None (no digest, any old one removed) when none of them can be read."""
    entries: dict[str, Any] = {}
    listed = _listing(trial_dir)
    if listed is not None:
        entries[DIR] = listed
    report = read_stamped(str(layout.report_beside(trial_dir)))
    if report is not None:
        try:
            entries[REPORT] = [report[1], report_entry(text_of(report[0]))]
        except UnicodeDecodeError:
            pass  # the audit reads it and says why it is unreadable
    for kind, name in RECORDS:
        record = _record_text(trial_dir / name) if listed is None or name in listed[1] else None
        if record is not None:
            entries[kind] = record
    events = read_stamped(str(trial_dir / layout.EVENTS))
    if events is not None:
        entries[EVENTS] = [events[1], encode_events(predictions_of(events[0]))]
    if journal_alone(listed):
        journal = read_stamped(str(trial_dir / layout.JOURNAL))
        summary = None if journal is None else encode_journal(summary_of_bytes(journal[0]))
        if journal is not None and summary is not None:
            entries[JOURNAL] = [journal[1], summary]
    cost = None if cost_csv is None else read_stamped(str(cost_csv))
    if cost is not None and (parsed := cost_file_of(cost[0])) is not None:
        entries[COST] = [cost[1], encode_costs(parsed)]
    path = layout.digest_beside(trial_dir)
    if not entries:
        path.unlink(missing_ok=True)
        return None
    data = {"digest": parsers_digest(), "cost_csv": None if cost_csv is None else cost_csv.name, **entries}
    # Not fsynced: a digest left unreadable by a crash is ignored (the audit reads the files then).
    write_bytes_atomic(path, orjson.dumps(data), durable=False)
    return path
