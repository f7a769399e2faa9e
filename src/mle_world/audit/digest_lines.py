"""A gathered digests file's lines, and the files the entries of a trial's digest stand for, read without
the parsers that made them: what the audit's memo checks again before it shows a re-audit.

Reads `runs/<configuration>/audit-digests.tsv` or a trial's `<task>_seed<seed>_audit-digest.json` and stats
the files their entries stand for; writes nothing. The kinds of entry are `audit/digest.py`'s (importing it
would load the parsers: 0.09 s of a re-audit's CPU); tests/audit/test_digest_lines.py holds them equal.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import orjson

from mle_world import layout
from mle_world.audit.cache import stamp_of
from mle_world.storage import read_stamped

DIR, REPORT, COST = "dir", "report", "cost"
"""`audit/digest.py`'s kinds of entry for the trial dir, its grading report and its cost CSV."""
FILES = {"status": layout.STATUS, "result": layout.RESULT, "events": layout.EVENTS, "journal": layout.JOURNAL}
"""`audit/digest.py`'s other kinds of entry, and the trial dir's file each stands for."""


def split_gathered(data: bytes) -> tuple[bytes, dict[str, bytes]]:
    """A gathered file's header line and its digests by trial dir name: each line after the header split at
    its first tab (a trial dir name holds none: `digest_files.gather_digests`), the last of a name kept."""
    header, _, body = data.partition(b"\n")
    trials: dict[str, bytes] = {}
    for line in body.split(b"\n"):
        name, tab, digest = line.partition(b"\t")
        if tab:
            trials[name.decode("utf-8", "replace")] = digest
    return header, trials


def used_entries_stand(source: str, used: object) -> bool:
    """Whether each entry an audit used of the digests at `source` (a configuration's gathered file, or a
    trial's own digest) still has its file's stamp. `used`: `ParsedInputs.lines[source]`, each trial's [dir
    name, kinds of entry]. For a caller that found `source` as the audit read it (its stamp unchanged: the
    memo's inputs hold it), so its digests are those the audit took as of its code. False when a trial's
    digest is not there or `used` is not of that shape; never raises.

    The memo keeps these, not each file's stamp: at 100,000 reports the 370,000 stamps were 53 MB to write
    (0.2-0.25 s of a first audit's CPU) and 90 MB held until then; a re-audit reads the digests again."""
    with ExitStack() as opened:
        fds: dict[str, int] = {}
        for file in used_entry_files(source, used):
            if file is None:
                return False
            directory, name, stamp = file
            at = fds.get(directory)
            if at is None:  # each file stat'ed from its dir's fd, as the audit did
                try:
                    at = fds[directory] = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                except OSError:
                    return False
                opened.callback(os.close, at)
            if stamp_of(name, at, name) != stamp:
                return False
    return True


def used_entry_files(source: str, used: object) -> Iterator[tuple[str, str, Any] | None]:
    """(dir, name in it, the entry's stamp) of each file whose entry an audit used of the digests at
    `source` (`used_entries_stand`); None for one that cannot stand (then nothing more). Never raises."""
    got = read_stamped(source)
    if got is None or type(used) is not list:
        yield None
        return
    configuration, _, base = source.rpartition("/")
    if base == layout.GATHERED_DIGESTS:
        digests = split_gathered(got[0])[1]
    else:
        digests = {base.removesuffix(layout.AUDIT_DIGEST_SUFFIX): got[0]}
    costs = str(layout.costs_dir(Path(configuration).parent.parent))
    for trial in used:
        data = _digest(digests, trial)
        if data is None or type(trial[1]) is not list:
            yield None
            return
        name, cost_csv = trial[0], data.get("cost_csv")
        if not isinstance(cost_csv, str) or not cost_csv or "/" in cost_csv:
            cost_csv = None  # a name in costs/, or none
        for kind in trial[1]:
            entry = data.get(kind) if type(kind) is str else None
            if type(entry) is not list or not entry:
                file = None
            elif kind == COST:
                file = None if cost_csv is None else (costs, cost_csv, entry[0])
            elif kind == DIR:
                file = (configuration, name, entry[0])
            elif kind == REPORT:
                file = (configuration, f"{name}{layout.REPORT_SUFFIX}", entry[0])
            elif kind in FILES:
                file = (configuration, f"{name}/{FILES[kind]}", entry[0])
            else:
                file = None
            yield file
            if file is None:
                return


def _digest(digests: dict[str, bytes], trial: object) -> dict[str, Any] | None:
    """The parsed digest of `trial` ([dir name, kinds]) among `digests`, when it is there and an object."""
    if type(trial) is not list or len(trial) != 2 or type(trial[0]) is not str or "/" in trial[0]:
        return None
    raw = digests.get(trial[0])
    if raw is None:
        return None
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return data if type(data) is dict else None
