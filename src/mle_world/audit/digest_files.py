"""Where the audit finds the trials' digests (`audit/digest.py` writes them): each trial's file beside its
dir, and its configuration's gathered file, written when a launch ends; and what a digest's entries are.

Reads `runs/<configuration>/<task>_seed<seed>_audit-digest.json`; writes and reads
`runs/<configuration>/audit-digests.tsv` (atomically); `write_digests` writes each ended trial's digest
again (reading its files and status.json) for `run_paper.py digest` and a regrade.

The gathered file is a line of the code's digest (`parsers_digest`), then a line per trial: its dir name, a
tab, and its digest's JSON as the trial wrote it (one line: orjson writes no newline). A first audit splits
it into lines and parses each trial's JSON only as it loads that trial, so its objects are freed (and their
memory used again) before the next trial's are made: parsed whole, the 127 MB of 100,000 reports' digests
took 610 MB of page faults at once.

Not covered by `digest.parsers_digest`: reading a digest decides nothing about what its entries hold, and
the cache (`audit/cache.py`) uses an entry only while its stamp and shape match, so a gathered file that
grew stale (a trial run or graded again since) serves nothing wrong, only less.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import orjson

from mle_world import layout
from mle_world.audit.attempts import FINAL_STATES
from mle_world.audit.cache import ParsedInputs, stamp_of
from mle_world.audit.digest import (
    COST,
    DIR,
    EVENTS,
    JOURNAL,
    RECORDS,
    REPORT,
    journal_alone,
    parsers_digest,
    write_trial_digest,
)
from mle_world.audit.digest_lines import split_gathered
from mle_world.records import TrialStatus
from mle_world.storage import Unreadable, load_record, read_stamped, write_bytes_atomic


def _of_this_code(raw: bytes) -> dict[str, Any] | None:
    """A digest file's parsed JSON, when it is an object written by this code."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return data if type(data) is dict and data.get("digest") == parsers_digest() else None


@cache
def _header() -> bytes:
    """The gathered file's first line (without its newline): the digest of the code that made its entries."""
    return parsers_digest().encode()


def gather_digests(output_dir: Path) -> list[Path]:
    """Gather each configuration's trial digests (those of this code) into `runs/<configuration>/` +
    `layout.GATHERED_DIGESTS`, a line per trial dir name; remove a gathered file with none to gather. The
    gathered files (written, or left as they were when they held exactly that). Each digest is kept as written, not read again: its entries stand for their files only
    while their stamps match, so a gathered digest that grew stale (a trial run or graded again since) serves
    nothing wrong, only less. Never raises: a configuration that cannot be listed or written keeps the
    gathered file it had (the audit reads its trials' own digests for what that file lacks)."""
    written: list[Path] = []
    runs = output_dir / layout.RUNS
    try:
        configurations = sorted(entry.path for entry in os.scandir(runs) if entry.is_dir())
    except OSError:
        return written
    suffix = layout.AUDIT_DIGEST_SUFFIX
    for configuration in configurations:
        lines = [_header()]
        path = Path(configuration) / layout.GATHERED_DIGESTS
        try:
            for name in sorted(os.listdir(configuration)):
                trial = name.removesuffix(suffix)
                if trial == name or name.startswith(".") or "\t" in trial or "\n" in trial:
                    continue
                got = read_stamped(f"{configuration}/{name}")
                # One of other code would be ignored when read, and so would a corrupt one (left out here);
                # so would one on several lines (not orjson's: edited), which the line split would cut.
                if got is None or b"\n" in got[0] or _of_this_code(got[0]) is None:
                    continue
                lines.append(trial.encode() + b"\t" + got[0])
            if len(lines) == 1:
                path.unlink(missing_ok=True)
                continue
            content = b"\n".join(lines) + b"\n"
            # Left as it is when it holds exactly this: rewritten, it would move the configuration dir's
            # stamp, and the audit's memo could no longer serve.
            if not _holds(path, content):
                # Not fsynced: a file left unreadable by a crash is ignored (the audit reads each trial's digest).
                write_bytes_atomic(path, content, durable=False)
        except OSError:
            continue
        written.append(path)
    return written


def _holds(path: Path, content: bytes) -> bool:
    try:
        return path.read_bytes() == content
    except OSError:
        return False


def read_gathered(parsed: ParsedInputs, path: str) -> dict[str, bytes]:
    """The trial digests gathered at `path` (trial dir name → its digest's JSON, for `entries_of`), when
    of this code; else none. Never raises."""
    got = read_stamped(path)
    if got is None:
        return {}
    parsed.seen[path] = got[1]
    header, trials = split_gathered(got[0])
    return trials if header == _header() else {}


def gathered_trials(path: Path) -> dict[str, dict[str, Any]] | None:
    """The digests a gathered file holds (trial dir name → digest), as a first audit reads them; None when
    it is of other code. For tests and tools, which read the file as a whole."""
    header, trials = split_gathered(path.read_bytes())
    if header != _header():
        return None
    return {name: orjson.loads(digest) for name, digest in trials.items()}


def read_digest(parsed: ParsedInputs, digest: str, cost_name: str) -> dict[str, Any] | None:
    """The entries of the digest at `digest` (`entries_of`); None when there is none. Never raises."""
    got = read_stamped(digest)
    if got is None:
        return None
    parsed.seen[digest] = got[1]
    return entries_of(got[0], cost_name)


def entries_of(digest: bytes, cost_name: str) -> dict[str, Any] | None:
    """The entries of a digest's JSON (a trial's own file, or its line of the gathered file), kind →
    [stamp, value], when it is one of this code, for the caller to hand to `parsed.get` as it reads each
    file (used while its stamp matches, never saved); else None. Its cost entry is kept only when it is for
    `cost_name`, the trial's cost CSV now. Never raises."""
    data = _of_this_code(digest)
    if data is None:
        return None
    if data.get("cost_csv") != cost_name:
        data.pop(COST, None)
    return data


def digest_stands(trial_dir: Path, cost_csv: Path | None) -> bool:
    """Whether the trial's digest is what `write_trial_digest` would write now: of this code, for `cost_csv`,
    and an entry of each kind exactly where its file (or dir) is, with the stamp that file has now (a file
    without an entry, one that could not be parsed, makes it not stand). Never raises."""
    got = read_stamped(str(layout.digest_beside(trial_dir)))
    data = None if got is None else _of_this_code(got[0])
    if data is None or data.get("cost_csv") != (None if cost_csv is None else cost_csv.name):
        return False
    listed = data.get(DIR)  # when it stands, the dir's names now: the journal's entry is for a journal alone
    alone = type(listed) is list and len(listed) == 2 and type(listed[1]) is list and journal_alone(listed)
    sources = {
        DIR: trial_dir,
        REPORT: layout.report_beside(trial_dir),
        **{kind: trial_dir / name for kind, name in RECORDS},
        EVENTS: trial_dir / layout.EVENTS,
        COST: cost_csv,
        JOURNAL: trial_dir / layout.JOURNAL if alone else None,
    }
    for kind, path in sources.items():
        stamp = None if path is None else stamp_of(str(path))
        entry = data.get(kind)
        if entry is None:
            if stamp is not None:
                return False
        elif stamp is None or type(entry) is not list or not entry or entry[0] != stamp:
            return False
    return True


@dataclass(frozen=True)
class Digested:
    """What `write_digests` did in one output dir."""

    written: int
    """Trial digests written with this code."""
    current: int
    """Ended trials whose digest stands as it is (`digest_stands`): kept, not written again."""
    not_ended: int
    """Trials whose status.json records no end (pending, submitted, running) or cannot be read: left as
    they were."""
    unreadable: int
    """Ended trials none of whose files could be read, or whose digest could not be written."""
    gathered: list[Path]
    """The configurations' gathered files (`gather_digests`)."""


def write_digests(output_dir: Path, on_trial: Callable[[], object] | None = None) -> Digested:
    """Write again, with this code, the digest of every trial under `runs/` that has ended (its status.json
    says so; without one, it has a grading report or a digest: graded or digested once ended), as the
    harness does when a trial ends; then gather them per configuration. A trial still pending, submitted or
    running keeps what it has (its end will write its digest). For a sweep whose digests are of other code
    (an upgrade changed how the audit parses) or that has none (from before digests), whose first audit
    would otherwise read every trial's files. A digest that stands as it is (of this code, every file with
    the stamp it holds) is kept: a second run costs four stats a trial, not a read and a write. Never
    raises for a file it cannot read or write. `on_trial` is called after each trial looked at (a progress
    bar's step)."""
    written = current = not_ended = unreadable = 0
    runs = output_dir / layout.RUNS
    try:
        configurations = sorted(e.path for e in os.scandir(runs) if e.is_dir() and not e.name.startswith("."))
    except OSError:
        configurations = []
    suffixes = (layout.AUDIT_DIGEST_SUFFIX, layout.REPORT_SUFFIX)
    for configuration in configurations:
        try:
            with os.scandir(configuration) as entries:
                found = [(e.name, e.is_dir()) for e in entries if not e.name.startswith(".")]
        except OSError:
            continue
        beside: set[str] = set()  # trials with a digest or a report beside their dir
        dirs: set[str] = set()
        for name, is_dir in found:
            if is_dir:
                dirs.add(name)
                continue
            for suffix in suffixes:
                if name.endswith(suffix):
                    beside.add(name.removesuffix(suffix))
        for name in sorted(dirs | beside):
            trial = Path(configuration) / name
            key = layout.parse_trial_dir(trial)
            if key is None:
                continue
            if on_trial is not None:
                on_trial()
            status = load_record(trial / layout.STATUS, TrialStatus) if name in dirs else None
            if isinstance(status, Unreadable) and status.missing:
                status = None
            if status is None:
                ended = name in beside
            else:
                ended = not isinstance(status, Unreadable) and status.state in FINAL_STATES
            if not ended:
                not_ended += 1
                continue
            cost_csv = layout.cost_path(output_dir, *key)
            if digest_stands(trial, cost_csv):
                current += 1
                continue
            try:
                made = write_trial_digest(trial, cost_csv)
            except OSError:
                made = None
            if made is None:
                unreadable += 1
            else:
                written += 1
    return Digested(written, current, not_ended, unreadable, gather_digests(output_dir))
