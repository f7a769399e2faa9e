"""Atomic writes of text, JSON and pydantic records, and tolerant reads of them.

Writes go to a temp file in the same directory, are fsynced, then renamed over the target, and the
directory is fsynced so that the rename itself survives a machine crash.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)


def sync_directory(path: Path) -> None:
    """fsync the directory `path` (after a rename into it: POSIX makes the new name durable only then);
    best effort, as some file systems refuse it (the data itself was fsynced already)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _creation_mode() -> int:
    """The mode open() would give a new file: 0o666 less the process's umask (mkstemp's temp file is
    always 0600: records renamed from it were unreadable to the rest of a group sharing the output
    dir, and `status` by a colleague reported them corrupt). Read from /proc, as setting the umask to
    read it would race the launcher's other threads; 0600 where it cannot be read."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as handle:
            for line in handle:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o600


def _naming(exc: OSError, path: Path) -> OSError:
    """The error of writing `path` (disk full, quota, read-only), named after it: a write's own error
    names no file, or the temp file's (the CLI prints `filename: strerror`)."""
    return type(exc)(exc.errno, exc.strerror, str(path)) if exc.errno else exc


def write_bytes_atomic(path: Path, data: bytes, mode: int | None = None, *, durable: bool = True) -> None:
    """Write `data` to `path` so that a reader sees either the old or the new file, never half; its
    mode is `mode`, else what the umask gives a new file.

    `durable=False` skips the fsync, for outputs that are rebuilt from their inputs anyway (a crash
    can then leave an empty or partial file under the new name, never a half-written old one).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise _naming(exc, path) from exc
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.chmod(tmp, _creation_mode() if mode is None else mode)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise _naming(exc, path) from exc
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if durable:
        sync_directory(path.parent)


def write_text_atomic(path: Path, text: str, mode: int | None = None) -> None:
    """Write `text` (UTF-8) to `path` atomically and durably."""
    write_bytes_atomic(path, text.encode("utf-8"), mode)


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON (indented, trailing newline) atomically."""
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=False, allow_nan=True) + "\n")


def write_model(path: Path, model: BaseModel) -> None:
    """Write a pydantic record as JSON atomically."""
    write_text_atomic(path, model.model_dump_json(indent=2) + "\n")


def read_regular(path: str | os.PathLike[str]) -> bytes:
    """The bytes of the regular file at `path`; OSError (EINVAL) for anything else. A FIFO put where a
    record belongs opens without waiting and is refused: `open()` blocked on it until a writer came."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", os.fspath(path))
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read()
    finally:
        os.close(fd)


def read_model(path: Path, model_type: type[M]) -> M:
    """Read and validate a pydantic record; raises OSError or pydantic.ValidationError."""
    return model_type.model_validate_json(path.read_text(encoding="utf-8"))


def append_jsonl(path: Path, record: dict[str, Any]) -> None:
    """Append one JSON line; a single write() of a short line is atomic on POSIX append.

    Through a bare descriptor, the directory made only when missing (the agent appends a few events
    a step: a text-mode file object and a mkdir per line were two thirds of the cost).
    """
    line = (json.dumps(record, separators=(",", ":")) + "\n").encode("utf-8")
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o666)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, flags, 0o666)
    try:
        view = memoryview(line)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
