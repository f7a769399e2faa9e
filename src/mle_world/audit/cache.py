"""What an earlier audit parsed from each cost CSV and events.jsonl, kept so that a re-audit parses only the
files that changed.

Reads and writes `<audit dir>/.parsed-inputs.json` (atomically). An entry is used only while its file has
the same size, inode, modification and change time (files are replaced atomically or appended to, so
any change shows there), and the whole file is dropped when the code that parses the inputs changes.
Plain JSON, so a tampered file can at worst be ignored (a bad entry is re-parsed), never run.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import orjson

from mle_world.storage import write_text_atomic

NAME = ".parsed-inputs.json"
T = TypeVar("T")
Stamp = list[int]


def code_digest() -> str:
    """Digest of the modules whose parsing the entries hold (a change there drops every entry)."""
    here = Path(__file__).parent
    sources = [here / "cost_totals.py", here / "predictions.py", here.parent / "records.py", Path(__file__)]
    digest = hashlib.sha256()
    for path in sources:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def stamp_of(path: str) -> Stamp | None:
    """Size, inode, modification and change time of `path`; None when it cannot be stat'ed."""
    try:
        st = os.stat(path)
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

    def get(
        self,
        kind: str,
        path: str,
        parse: Callable[[str], T],
        encode: Callable[[T], Any],
        decode: Callable[[Any], T],
    ) -> T:
        """The parsed file: from an entry whose stamp still matches, else `parse(path)` (and kept)."""
        stamp = stamp_of(path)
        if stamp is None:
            return parse(path)
        bucket = self.entries.get(kind)
        entry = bucket.get(path) if isinstance(bucket, dict) else None
        if isinstance(entry, list) and len(entry) == 2 and entry[0] == stamp and entry[1] is not None:
            try:
                value = decode(entry[1])
            except (TypeError, ValueError, KeyError, IndexError):
                value = parse(path)
                entry = [stamp, encode(value)]
        else:
            value = parse(path)
            entry = [stamp, encode(value)]
        if entry[1] is not None:  # encode gives None for what JSON would not carry faithfully
            self.used.setdefault(kind, {})[path] = entry
        return value

    def save(self) -> None:
        if self.path is not None:
            data = {"digest": self.digest, "entries": self.used}
            write_text_atomic(self.path, orjson.dumps(data).decode())


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
