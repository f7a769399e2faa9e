"""A re-audit's shortcut: what the last audit showed, kept beside the files it wrote, and shown again while
every input it read, its flags and the harness's code are as they were (nothing is read or computed).

Reads and writes `<audit dir>/.audit-memo.json` (atomically); stats the inputs the last audit read (their
stamps: size, inode, modification and change time) and the outputs it wrote. The files a trial's digest
stood for are checked against the digest's entries the audit used (`audit/digest_lines.py`), which the memo
names instead of keeping each file's stamp again.

A stamp the audit took itself while reading (the parsed-inputs cache's) is trusted; one taken after the
audit ran (status.json, launch.json, the configuration dirs, ...) is trusted only when the path had not
changed for `SETTLED_NS` before the audit began: one that changed since may have changed after it was
read, and no memo is kept then (the next audit computes everything again, and keeps one).
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import orjson

from mle_world import __version__, layout
from mle_world.audit.cache import ParsedInputs, stamp_of
from mle_world.audit.digest_lines import used_entries_stand
from mle_world.launch.display import Display
from mle_world.storage import Stamp, write_bytes_atomic

if TYPE_CHECKING:  # not imported at run time: a memo shown reads no records
    from mle_world.audit.collect import Sweep

NAME = ".audit-memo.json"
SETTLED_NS = 2_000_000_000
"""How long before the audit began a path read without its own stamp must have been unchanged."""
LIBRARIES = ("numpy", "jinja2", "markupsafe", "pydantic", "matplotlib", "pillow", "orjson")
"""Libraries whose version can change what the audit writes (numbers, pages, PNGs)."""


def memo_key(dirs: Sequence[Path], out_dir: Path, flags: dict[str, bool]) -> str:
    """Digest of what the audit's output depends on besides its inputs: the dirs, out dir, flags, the
    harness's source and templates, its version, Python's and the libraries'."""
    versions: dict[str, str | None] = {}
    for name in LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    head = {
        "dirs": [str(d) for d in dirs],
        "out": str(out_dir),
        "flags": flags,
        "harness": __version__,
        "python": sys.version,
        "libraries": versions,
    }
    digest = hashlib.sha256(orjson.dumps(head, option=orjson.OPT_SORT_KEYS))
    package = Path(__file__).resolve().parents[1]
    sources = sorted(p for p in package.rglob("*") if p.suffix in (".py", ".j2", ".css", ".js"))
    for path in sources:
        digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


class RecordingDisplay:
    """Forwards to `display` and keeps each line and table shown (the memo shows them again)."""

    def __init__(self, display: Display) -> None:
        self.display = display
        self.shown: list[list[Any]] = []

    def say(self, text: str) -> None:
        self.shown.append(["say", text])
        self.display.say(text)

    def start_progress(self, total: int) -> None:
        self.display.start_progress(total)

    def update_progress(self, done: int, running: int, failed: int) -> None:
        self.display.update_progress(done, running, failed)

    def stop_progress(self) -> None:
        self.display.stop_progress()

    def table(
        self, title: str, columns: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[str] = ()
    ) -> None:
        self.shown.append(["table", title, list(columns), [list(r) for r in rows], list(right)])
        self.display.table(title, columns, rows, right=right)


@dataclass(frozen=True)
class Memo:
    """What an audit showed and whether its sweep had problems, with the stamps it holds for."""

    key: str
    inputs: dict[str, Stamp | None]
    outputs: dict[str, Stamp | None]
    shown: list[list[Any]] = field(default_factory=list)
    bad: bool = False
    """Something was missing, invalid, duplicated or off (`--strict` exits 1)."""
    heads: dict[str, Stamp | None] = field(default_factory=dict)
    """The input dirs' launch.json, runs/, costs/ and configuration dirs (`Inputs.heads`): stat'ed first."""
    digests: dict[str, Any] = field(default_factory=dict)
    """The entries of the trials' digests the audit used (`Inputs.digests`), checked last."""

    def current(self) -> bool:
        """Every input and output still has the stamp the memo recorded, and each digest entry used the
        stamp of its file."""
        for stamps in (self.outputs, self.heads, self.inputs):
            for path, stamp in stamps.items():
                if stamp_of(path) != stamp:
                    return False
        return all(used_entries_stand(source, used) for source, used in self.digests.items())

    def show(self, display: Display) -> None:
        """The lines and tables the audit showed, in its order, on `display`."""
        for call in self.shown:
            if call[0] == "say":
                display.say(call[1])
            else:
                display.table(call[1], call[2], call[3], right=call[4])


def load_memo(out_dir: Path, key: str) -> Memo | None:
    """The memo kept in `out_dir` for `key`; None when there is none, it is unreadable or for another key."""
    try:
        data = orjson.loads((out_dir / NAME).read_bytes())
        if not isinstance(data, dict) or data.get("key") != key:
            return None
        memo = Memo(
            key, data["inputs"], data["outputs"], data["shown"], data["bad"], data["heads"], data["digests"]
        )
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError):
        return None
    if not (
        isinstance(memo.inputs, dict)
        and isinstance(memo.heads, dict)
        and isinstance(memo.digests, dict)
        and isinstance(memo.outputs, dict)
        and isinstance(memo.shown, list)
        and all(_well_formed(call) for call in memo.shown)
        and type(memo.bad) is bool
    ):
        return None
    return memo


def _well_formed(call: object) -> bool:
    if not isinstance(call, list) or not call:
        return False
    if call[0] == "say":
        return len(call) == 2 and isinstance(call[1], str)
    return (
        call[0] == "table"
        and len(call) == 5
        and isinstance(call[1], str)
        and all(isinstance(x, list) for x in call[2:])
    )


def drop_memo(out_dir: Path) -> None:
    """Remove the memo (before an audit that may write other outputs)."""
    try:
        os.unlink(out_dir / NAME)
    except (FileNotFoundError, NotADirectoryError):
        pass


@dataclass(frozen=True)
class Inputs:
    """The stamps a memo keeps of what an audit read or looked for (`input_stamps`)."""

    heads: dict[str, Stamp | None]
    """Each input dir's launch.json, runs/, costs/ and configuration dirs: a sweep still running changes them
    most often, so a memo is checked against them first (then no trial's file is looked at: 0.73 → 0.0004 s
    of CPU at 100,000 reports when a configuration dir had just changed)."""
    files: dict[str, Stamp | None]
    """Every other path but those of `digests`."""
    digests: dict[str, list[list[Any]]] = field(default_factory=dict)
    """The entries the audit used of each trial digest (`ParsedInputs.lines`): their files' stamps are the
    entries' own, not kept again."""


def input_stamps(sweep: Sweep, parsed: ParsedInputs, began_ns: int) -> Inputs | None:
    """The stamp of every input the audit of `sweep` read or looked for; None when one may have changed
    after it was read.

    From `parsed` (what this audit read): its used entries' stamps and `seen`'s were taken with the read;
    the files its `stood` holds are those of the digest entries it used (`lines`, kept as they are);
    every other path is stat'ed now, the heads first. `seen` is taken over, not copied (the result's
    `files`).
    """
    settled = began_ns - SETTLED_NS
    heads: dict[str, Stamp | None] = {}
    files = cast("dict[str, Stamp | None]", parsed.seen)
    stood = parsed.stood

    def settled_all(paths: Iterable[str], stamps: dict[str, Stamp | None]) -> bool:
        for path in paths:
            if path not in stamps and path not in stood:
                stamp = stamp_of(path)
                if stamp is not None and stamp[3] >= settled:
                    return False
                stamps[path] = stamp
        return True

    listed: list[str] = []
    for output_dir in sweep.dirs:
        layout_files = layout.OutputFiles(output_dir)
        listed += (str(layout_files.launch), str(layout_files.runs), str(layout_files.costs))
        listed += (p for p in _entries(str(layout_files.runs)) if os.path.isdir(p))  # each report's dir
    if not settled_all(listed, heads):
        return None
    for entries in parsed.used.values():
        for path, entry in entries.items():
            files.setdefault(path, entry[0])  # a digest's stamp (`seen`) stands, as it always has
    pending: list[str] = []
    for output_dir in sweep.dirs:
        pending += _entries(str(layout.OutputFiles(output_dir).costs))
    submission, submission_csv = layout.SUBMISSION_DIR, str(layout.SUBMISSION_RELPATH)
    for trial in sweep.trials:
        pending.append(trial.report_text)
        if trial.recorded_absent is not None:
            pending.append(trial.recorded_absent)
        if trial.dir_missing:
            continue
        directory, names = trial.dir_text, trial.files
        pending.append(directory)
        pending += [f"{directory}/{name}" for name in (layout.TRIAL_RECORDS if names is None else names)]
        if names is None or submission in names:
            pending += (f"{directory}/{submission}", f"{directory}/{submission_csv}")
    pending += sweep.unexpected
    return Inputs(heads, files, parsed.lines) if settled_all(pending, files) else None


def _entries(directory: str) -> list[str]:
    # As the readers name them (f"{dir}/{name}"); os.path.join was 0.2 s for 100,000 cost CSVs.
    try:
        return [f"{directory}/{name}" for name in os.listdir(directory)]
    except OSError:
        return []


def save_memo(
    out_dir: Path,
    key: str,
    inputs: Inputs,
    outputs: Iterable[Path],
    shown: list[list[Any]],
    bad: bool,
) -> None:
    """Keep the memo: `outputs` are stamped now (the audit has just written them)."""
    written = {str(p): stamp_of(str(p)) for p in outputs}
    data = {
        "key": key,
        "heads": inputs.heads,
        "inputs": inputs.files,
        "digests": inputs.digests,
        "outputs": written,
        "shown": shown,
        "bad": bad,
    }
    # Not fsynced: a memo left unreadable by a crash is ignored (the next audit computes everything).
    write_bytes_atomic(out_dir / NAME, orjson.dumps(data), durable=False)
