"""Error types shared by every stage of the harness.

Reads and writes nothing; `UserError` is what the CLI turns into one line and exit code 2.
"""

from __future__ import annotations

from pathlib import Path


def not_utf8(exc: UnicodeDecodeError) -> str:
    """Where a file's text stops being UTF-8, for a one-line error ("byte 0x.. at offset N")."""
    return f"byte 0x{exc.object[exc.start]:02x} at offset {exc.start}"


def not_a_dir(path: Path) -> str:
    """Why `path` is no directory, for a one-line error: a file in its place reads differently from nothing."""
    return "not a directory (a file of that name exists)" if path.exists() else "no such directory"


class UserError(Exception):
    """A problem with the user's input (file, flag, field); shown as one line, exit code 2."""

    exit_code = 2


class ConfigError(UserError):
    """A configuration file is malformed or inconsistent."""


class NotPreparedError(UserError):
    """A task's data is missing under the data dir."""


class GraderUnavailableError(UserError):
    """The grader itself cannot run (mlebench missing or broken): no trial can be graded until it is fixed."""
