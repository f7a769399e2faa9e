"""Atomic writes of text, JSON and pydantic records, and the one strict and one tolerant read of them.

Writes go to a temp file in the same directory, are fsynced, then renamed over the target, and the
directory is fsynced so that the rename itself survives a machine crash. Reads open regular files only.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from pydantic import BaseModel, ValidationError

from mle_world.errors import UserError, not_utf8

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


READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
"""A FIFO or device opens without waiting (and is then found not to be a regular file)."""


def _refuse(path: str | os.PathLike[str], mode: int) -> OSError:
    """What open() says of a directory (its readers name IsADirectoryError), else "not a regular file"."""
    if stat.S_ISDIR(mode):
        return IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), os.fspath(path))
    return OSError(errno.EINVAL, "not a regular file", os.fspath(path))


def read_regular(path: str | os.PathLike[str]) -> bytes:
    """The bytes of the regular file at `path`; IsADirectoryError for a directory, OSError (EINVAL) for
    anything else. A FIFO put where a record belongs opens without waiting and is refused: `open()`
    blocked on it until a writer came."""
    fd = os.open(path, READ_FLAGS)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _refuse(path, st.st_mode)
        return _read_all(fd, st.st_size)
    finally:
        os.close(fd)


def _read_all(fd: int, size: int) -> bytes:
    """The rest of `fd`, read in one call when `size` (fstat's) is right; no file object (the audit reads
    10,000 status files: a file object per read was a third of their cost)."""
    data = os.read(fd, size + 1)
    if len(data) != size:  # it grew or shrank since fstat (or a short read): read to its end
        chunks = [data]
        while chunk := os.read(fd, max(size, 1 << 16)):
            chunks.append(chunk)
        data = b"".join(chunks)
    return data


Stamp = list[int]
"""Size, inode, modification and change time of a file (the audit's cache keys its entries by it)."""


def read_stamped(path: str) -> tuple[bytes, Stamp] | None:
    """The audit's bulk read: the bytes of the regular file at `path` and its stamp, both from one open
    file; None when it is no regular file or cannot be opened or read (the caller reads it the usual way
    then, which says why). Cheaper than `open()`: no file object, and no stat before opening."""
    try:
        fd = os.open(path, READ_FLAGS)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        data = _read_all(fd, st.st_size)
    except OSError:
        return None
    finally:
        os.close(fd)
    return data, [st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns]


def text_of(data: bytes, errors: str = "strict") -> str:
    """`data` as `open(path, encoding="utf-8", errors=errors).read()` gives a file holding it: UTF-8,
    with universal newlines (CR LF and CR read as LF); raises UnicodeDecodeError as that read does."""
    text = data.decode("utf-8", errors)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def read_text(path: str | os.PathLike[str], errors: str = "strict") -> str:
    """The UTF-8 text of the regular file at `path`, as `open(path, encoding="utf-8", errors=errors).read()`
    gives it (but refusing a FIFO or directory); raises OSError or UnicodeDecodeError."""
    return text_of(read_regular(path), errors)


class Unreadable(NamedTuple):
    """Why a record could not be read: the file and the error, which the reader's caller words."""

    path: str
    error: OSError | UnicodeDecodeError | ValidationError
    """OSError (FileNotFoundError when missing; "not a regular file" for a FIFO), UnicodeDecodeError, or
    ValidationError (not JSON, or not the record)."""

    @property
    def missing(self) -> bool:
        return isinstance(self.error, FileNotFoundError)

    @property
    def reason(self) -> str:
        """One phrase: the OS's, where the text stops being UTF-8, or the first validation message."""
        exc = self.error
        if isinstance(exc, UnicodeDecodeError):
            return f"not UTF-8 text: {not_utf8(exc)}"
        if isinstance(exc, ValidationError):
            return str(exc.errors()[0]["msg"])
        return exc.strerror or str(exc)

    @property
    def detail(self) -> str:
        """`reason`, led by where in the record a validation error is (`trials.0.trial_id: Field required`)."""
        exc = self.error
        if isinstance(exc, ValidationError):
            where = ".".join(str(part) for part in exc.errors()[0]["loc"])
            return f"{where}: {self.reason}" if where else self.reason
        return self.reason

    def line(self, what: str) -> str:
        """The one-line error naming the file: `<path>: cannot read the <what> (<reason>)` when it could not
        be read, `<path>: not a valid <what> (<reason>)` when what it holds is no such record."""
        verb = "cannot read the" if isinstance(self.error, OSError) else "not a valid"
        return f"{self.path}: {verb} {what} ({self.reason})"


def load_record(path: str | os.PathLike[str], model_type: type[M]) -> M | Unreadable:
    """The tolerant read, for views that must survive a corrupt file: the record, or why there is none."""
    try:
        text = read_regular(path).decode("utf-8")
        return model_type.model_validate_json(text)
    except (OSError, UnicodeDecodeError, ValidationError) as exc:
        return Unreadable(os.fspath(path), exc)


def read_record(
    path: str | os.PathLike[str], model_type: type[M], what: str, *, default: M | None = None
) -> M:
    """The strict read: the record at `path`, `default` when the file is missing and one is given; else a
    UserError of one line naming the file (`Unreadable.line`), which the CLI shows with exit 2."""
    got = load_record(path, model_type)
    if not isinstance(got, Unreadable):
        return got
    if got.missing and default is not None:
        return default
    raise UserError(got.line(what))


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
