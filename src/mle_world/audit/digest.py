"""A trial's audit digest: what the audit parses of its events.jsonl and cost CSV, parsed once when the
trial ends, with the stamps of the bytes parsed, so that a first audit reads one small file per trial.

Reads a trial's events.jsonl and cost CSV; writes and reads `<trial dir>/audit-digest.json` (atomically).

Its entries are the parsed-inputs cache's (`audit/cache.py`): the same parse, the same encoding, the stamp
taken from the open file that was parsed. The audit hands them to that cache beside what an earlier audit
kept (it does not keep them again), so each is used only while its file has that stamp (size, inode,
modification and change time: a trial run again, costs accounted again, a dir copied elsewhere all
show), and the whole digest
only while the code that parses and keeps them is the audit's own (`parsers_digest`). Written by the
harness after the agent exits (`launch.post_trial`), beside records the agent's generated code cannot
reach; plain JSON, so a digest someone edits can make the audit wrong as an edited events.jsonl can,
but never runs anything.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import orjson

from mle_world import layout
from mle_world.audit.cache import PARSERS, ParsedInputs, code_digest
from mle_world.audit.cost_totals import cost_file_of
from mle_world.audit.cost_totals import encode as encode_costs
from mle_world.audit.predictions import encode as encode_events
from mle_world.audit.predictions import predictions_of
from mle_world.storage import read_stamped, write_bytes_atomic

EVENTS, COST = "events", "cost"
"""The kinds of entry, as the parsed-inputs cache names them."""


@cache
def parsers_digest() -> str:
    """Digest of the code that made a digest's entries: the parsers, not the rest of the audit (whose
    changes would otherwise drop the digest of every trial that ever ran; it is written only once)."""
    return code_digest((*PARSERS, "cache.py", "digest.py"))


def write_trial_digest(trial_dir: Path, cost_csv: Path | None) -> Path | None:
    """Parse the trial's events.jsonl and `cost_csv` as the audit does and keep both in its digest; None
    (no digest, any old one removed) when neither can be read as a regular file."""
    entries: dict[str, Any] = {}
    events = read_stamped(str(trial_dir / layout.EVENTS))
    if events is not None:
        entries[EVENTS] = [events[1], encode_events(predictions_of(events[0]))]
    cost = None if cost_csv is None else read_stamped(str(cost_csv))
    if cost is not None and (parsed := cost_file_of(cost[0])) is not None:
        entries[COST] = [cost[1], encode_costs(parsed)]
    path = trial_dir / layout.AUDIT_DIGEST
    if not entries:
        path.unlink(missing_ok=True)
        return None
    data = {"digest": parsers_digest(), "cost_csv": None if cost_csv is None else cost_csv.name, **entries}
    # Not fsynced: a digest left unreadable by a crash is ignored (the audit parses the files then).
    write_bytes_atomic(path, orjson.dumps(data), durable=False)
    return path


def offer_digest(parsed: ParsedInputs, trial_dir: str, events: str, cost_csv: str) -> None:
    """Hand the digest in `trial_dir` (if any, and of this code) to `parsed` as offered entries for the
    trial's `events` and `cost_csv` paths (used while their stamps match, never saved). Never raises."""
    path = f"{trial_dir}/{layout.AUDIT_DIGEST}"
    got = read_stamped(path)
    if got is None:
        return
    parsed.seen[path] = got[1]
    try:
        data = orjson.loads(got[0])
    except orjson.JSONDecodeError:
        return
    if type(data) is not dict or data.get("digest") != parsers_digest():
        return
    entries = parsed.offered
    offered = ((EVENTS, events), (COST, cost_csv))
    for kind, path in offered:
        entry = data.get(kind)
        if entry is None or (kind == COST and data.get("cost_csv") != path.rpartition("/")[2]):
            continue
        bucket = entries.get(kind)
        if not isinstance(bucket, dict):
            bucket = entries[kind] = {}
        bucket[path] = entry  # `get` checks its stamp and shape before using it
