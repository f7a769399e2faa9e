"""What an earlier audit read from each input file (cost CSVs and events.jsonl parsed, trial dir listings;
for grading reports only their stamps), kept so that a re-audit reads only the files that changed; and
the one read of a file with its stamp.

Reads and writes `<audit dir>/.parsed-inputs.json` (atomically). An entry is used only while its file (or
dir) has the same size, inode, modification and change time (files are replaced atomically or appended
to, entries added or removed, so any change shows there), and the whole file is dropped when the code
that parses the inputs changes. A file without an entry is read with its stamp taken from the same open
file (`storage.read_stamped`, the bulk read beside the record readers), so the stamp is never newer than the bytes parsed (a change after it shows). Plain
JSON: an entry that does not decode is read again, and a file someone edits by hand can make the audit
wrong (as editing report.md can) but never runs anything.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import orjson

from mle_world.storage import Stamp, read_stamped, write_bytes_atomic
from mle_world.storage import text_of as text_of  # the audit's tests and parsers of bytes know it here

NAME = ".parsed-inputs.json"
T = TypeVar("T")


PARSERS = ("cost_totals.py", "predictions.py", "shapes.py", "report_view.py", "journals.py")
"""The audit's modules that parse cost CSVs, events.jsonl, reports and journals into the entries (and encode
them)."""
ALL = ("collect.py", "listing.py", *PARSERS, "cache.py", "digest.py")


BENEATH = ("records.py", "storage.py", "grading/report.py")
"""The package's modules the entries' parsing builds on: the records, how files are read, the report."""


def code_digest(names: tuple[str, ...] = ALL) -> str:
    """Digest of the modules whose parsing the entries hold (a change there drops every entry): `names`
    of the audit's, and the records and storage they build on."""
    here = Path(__file__).parent
    package = here.parent
    sources = [*(here / name for name in names), *(package / name for name in BENEATH)]
    digest = hashlib.sha256()
    for path in sources:
        digest.update(path.read_bytes())
    return digest.hexdigest()


_MISS = object()
"""What `_decoded` gives for an entry that does not serve."""


def _decoded(entry: Any, stamp: Stamp | None, decode: Callable[[Any], T]) -> T | object:
    """The value of `entry` ([stamp, value]) when it has this `stamp` and a value that decodes, else `_MISS`
    (an entry of a stamp alone serves no read; one that does not decode is read again)."""
    if stamp is None or type(entry) is not list or len(entry) != 2 or entry[0] != stamp or entry[1] is None:
        return _MISS
    try:
        return decode(entry[1])
    except (TypeError, ValueError, KeyError, IndexError):
        return _MISS


def stamp_of(path: str, at: int | None = None, name: str = "") -> Stamp | None:
    """Size, inode, modification and change time of `path`; None when it cannot be stat'ed. `at`: an fd of
    a directory that holds it as `name`, stat'ed from there (`ParsedInputs.get`)."""
    try:
        st = os.stat(path) if at is None else os.stat(name, dir_fd=at)
    except OSError:
        return None
    return [st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns]


@dataclass
class ParsedInputs:
    """Parsed files by kind and path; `used` is what this audit read (saved; the rest is dropped)."""

    path: Path | None
    digest: str
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    used: dict[str, dict[str, Any]] = field(default_factory=dict)
    offered: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Entries of the trials' digests (`audit/digest.py`) read before their files are (the cost CSVs, read
    after every trial's digest): used like kept ones (and then dropped, their stamps in `seen`), never saved
    (each trial's digest offers them again, and at 100,000 reports they were 90 % of this file and of its
    write). The rest of a digest's entries are handed to `get` as it reads their files."""
    seen: dict[str, Stamp] = field(default_factory=dict)
    """Stamps this audit took with a read that keeps no entry (the trials' digests) or matched an offered
    entry's (the files a digest stood for, outside a trial's `lines`): the memo trusts them as it trusts
    the entries' (no stat again), and they are never saved."""
    stood: set[str] = field(default_factory=set)
    """The files a trial's digest stood for while `current` was set: the memo keeps which of a digest's
    entries were used (`lines`), not their 370,000 stamps at 100,000 reports."""
    lines: dict[str, list[list[Any]]] = field(default_factory=dict)
    """Per digest the trials took entries from (a configuration's gathered file or a trial's own), each
    trial's [dir name, the kinds of entry used] (`digest_lines.used_entries_stand` checks them again)."""
    current: list[str] | None = None
    """The kinds of entry used so far of the trial being loaded, while the trial loop sets it."""
    read: int = 0
    """Files read (not taken from an entry) by this audit."""

    def get(
        self,
        kind: str,
        path: str,
        parse: Callable[[str], T],
        encode: Callable[[T], Any],
        decode: Callable[[Any], T],
        parse_bytes: Callable[[bytes], T | None] | None = None,
        offered: Any = None,
        at: int | None = None,
        name: str = "",
    ) -> T:
        """The parsed file: from an entry whose stamp still matches, else parsed (and kept).

        `offered`: the trial's digest's entry for the file (`audit/digest.py`), tried first: used while its
        stamp matches, never kept (its stamp goes to `seen`). Parsed by `parse_bytes(its bytes)` when given
        and `read_stamped` reads the file, else (or when that gives None: it cannot tell) by `parse(path)`,
        which reads it the usual way.

        `at`: the fd of a directory that holds the file as `name` (`path`'s last components), for the stat
        that checks `offered`: resolved from there, not through every component of `path` (0.2 of the
        1.05 s of CPU of a first audit's 372,000 stats at 100,000 reports, whose paths are ten deep).
        """
        stamp = None
        if offered is not None:
            stamp = stamp_of(path, at, name)
            value = _decoded(offered, stamp, decode)
            if value is not _MISS:
                self.took(kind, path, offered[0])
                return value  # type: ignore[return-value]
        for held in (self.entries, self.offered):
            bucket = held.get(kind)
            entry = bucket.get(path) if isinstance(bucket, dict) else None
            if entry is None:
                continue
            if stamp is None:
                stamp = stamp_of(path)
            value = _decoded(entry, stamp, decode)
            if value is not _MISS:
                if held is self.offered and bucket is not None:
                    # Never saved: its stamp is all the memo needs, and the digest's data is freed now (at
                    # 100,000 reports the decoded digests were a third of the audit's memory).
                    del bucket[path]
                    self.seen[path] = entry[0]  # equal to the stamp just taken
                else:
                    self.used.setdefault(kind, {})[path] = entry
                return value  # type: ignore[return-value]
        if parse_bytes is not None:
            got = read_stamped(path)
            if got is not None:
                parsed = parse_bytes(got[0])
                if parsed is not None:
                    return self._keep(kind, path, got[1], parsed, encode)
        if stamp is None:
            stamp = stamp_of(path)
        if stamp is None:
            return parse(path)
        return self._keep(kind, path, stamp, parse(path), encode)

    def took(self, kind: str, path: str, stamp: Stamp) -> None:
        """A digest's entry of `kind` for `path`, whose `stamp` the file still has, was used: the trial's
        `current` kind (its stamp is freed with the digest), else its stamp kept in `seen`."""
        if self.current is None:
            self.seen[path] = stamp
        else:
            self.current.append(kind)
            self.stood.add(path)

    def offer(self, kind: str, path: str, entry: Any) -> None:
        """Offer a trial digest's `entry` for the file at `path` to a later `get` of it (see `offered`)."""
        bucket = self.offered.get(kind)
        if bucket is None:
            bucket = self.offered[kind] = {}
        bucket[path] = entry  # `get` checks its stamp and shape before using it

    def _keep(self, kind: str, path: str, stamp: Stamp, value: T, encode: Callable[[T], Any]) -> T:
        """`value`, read from the file `stamp` describes, kept as its entry."""
        self.read += 1
        # encode gives None for what is not worth keeping or JSON would not carry faithfully: the stamp is
        # kept alone then (the memo trusts it, taken with the read), and the file is read again next time.
        self.used.setdefault(kind, {})[path] = [stamp, encode(value)]
        return value

    def save(self) -> None:
        """Keep what this audit used (no digest's entry), unless that is exactly what was kept already."""
        keep: dict[str, dict[str, Any]] = {}
        for kind, bucket in self.used.items():
            # A stamp alone (no value) serves only this audit's memo: the next audit reads that file again.
            kept = {path: e for path, e in bucket.items() if e[1] is not None}
            if kept:
                keep[kind] = kept
        held = sum(len(b) for b in self.entries.values() if isinstance(b, dict))
        if not self.read and sum(len(b) for b in keep.values()) == held:
            return
        if self.path is not None:
            # Not fsynced: a file left unreadable by a crash is ignored (the next audit reads every input).
            write_bytes_atomic(
                self.path, orjson.dumps({"digest": self.digest, "entries": keep}), durable=False
            )


def open_parsed_inputs(audit_dir: Path | None) -> ParsedInputs:
    """The entries kept in `audit_dir` (none when it has none, they are unreadable or from other code)."""
    digest = code_digest()
    if audit_dir is None:
        return ParsedInputs(None, digest)
    path = audit_dir / NAME
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return ParsedInputs(path, digest)
    if (
        not isinstance(data, dict)
        or data.get("digest") != digest
        or not isinstance(data.get("entries"), dict)
    ):
        return ParsedInputs(path, digest)
    return ParsedInputs(path, digest, data["entries"])
