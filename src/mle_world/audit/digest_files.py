"""Where the audit finds the trials' digests (`audit/digest.py` writes them): each trial's file beside its
dir, and its configuration's gathered file, written when a launch ends; and what a digest's entries are.

Reads `runs/<configuration>/<task>_seed<seed>_audit-digest.json`; writes and reads
`runs/<configuration>/audit-digests.json` (atomically).

Not covered by `digest.parsers_digest`: reading a digest decides nothing about what its entries hold, and
the cache (`audit/cache.py`) uses an entry only while its stamp and shape match, so a gathered file that
grew stale (a trial run or graded again since) serves nothing wrong, only less.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

from mle_world import layout
from mle_world.audit.cache import ParsedInputs
from mle_world.audit.digest import COST, parsers_digest
from mle_world.storage import read_stamped, write_bytes_atomic


def _of_this_code(raw: bytes) -> dict[str, Any] | None:
    """A digest file's (or gathered file's) parsed JSON, when it is an object written by this code."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return data if type(data) is dict and data.get("digest") == parsers_digest() else None


def gather_digests(output_dir: Path) -> list[Path]:
    """Gather each configuration's trial digests (those of this code) into `runs/<configuration>/` +
    `layout.GATHERED_DIGESTS`, keyed by trial dir name; remove a gathered file with none to gather. The
    written paths. Each digest is kept as written, not read again: its entries stand for their files only
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
        trials: dict[str, Any] = {}
        path = Path(configuration) / layout.GATHERED_DIGESTS
        try:
            for name in sorted(os.listdir(configuration)):
                if not name.endswith(suffix) or name.startswith("."):
                    continue
                got = read_stamped(f"{configuration}/{name}")
                # One of other code would be ignored when read, and so would a corrupt one (left out here).
                data = None if got is None else _of_this_code(got[0])
                if data is not None:
                    del data["digest"]
                    trials[name.removesuffix(suffix)] = data
            if not trials:
                path.unlink(missing_ok=True)
                continue
            # Not fsynced: a file left unreadable by a crash is ignored (the audit reads each trial's digest).
            write_bytes_atomic(
                path, orjson.dumps({"digest": parsers_digest(), "trials": trials}), durable=False
            )
        except OSError:
            continue
        written.append(path)
    return written


def read_gathered(parsed: ParsedInputs, path: str) -> dict[str, Any]:
    """The trial digests gathered at `path` (trial dir name → digest), when of this code; else none. Never
    raises."""
    got = read_stamped(path)
    if got is None:
        return {}
    parsed.seen[path] = got[1]
    data = _of_this_code(got[0])
    trials = None if data is None else data.get("trials")
    return trials if type(trials) is dict else {}


def read_digest(parsed: ParsedInputs, digest: str, cost_csv: str) -> dict[str, Any] | None:
    """The entries of the digest at `digest` (kind → [stamp, value]) when it is one of this code, for the
    caller to hand to `parsed.get` as it reads each file (used while its stamp matches, never saved); None
    when there is none. Its cost entry, for `cost_csv` (read after every trial's digest), is offered to
    `parsed` instead. Never raises."""
    got = read_stamped(digest)
    if got is None:
        return None
    parsed.seen[digest] = got[1]
    data = _of_this_code(got[0])
    return None if data is None else take_digest(parsed, data, cost_csv)


def take_digest(parsed: ParsedInputs, data: Any, cost_csv: str) -> dict[str, Any] | None:
    """A digest's entries as `read_digest` gives them, from its parsed `data` (read alone or gathered)."""
    if type(data) is not dict:
        return None
    cost = data.pop(COST, None)
    if cost is not None and data.get("cost_csv") == cost_csv.rpartition("/")[2]:
        bucket = parsed.offered.get(COST)
        if bucket is None:
            bucket = parsed.offered[COST] = {}
        bucket[cost_csv] = cost  # `get` checks its stamp and shape before using it
    return data
