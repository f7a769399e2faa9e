"""Checks of the places the CLI is told to write or read before anything is written.

Reads the file system (existence, type, permission); creates a directory only in `ensure_dir`.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from mle_world.errors import UserError, not_a_dir


def check_writable_dir(path: Path, flag: str) -> None:
    """Refuse a path that is a file, lies under a file, or sits where we may not create it."""
    path = path.absolute()
    if path.exists() and not path.is_dir():
        raise UserError(f"{flag} {path}: not a directory (a file of that name exists)")
    existing = path
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise UserError(f"{flag} {path}: lies under {existing}, which is a file")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UserError(f"{flag} {path}: {existing} is not writable")


def ensure_dir(path: Path, flag: str) -> Path:
    """Create a directory the user named; the OS's refusal becomes one line naming the flag."""
    check_writable_dir(path, flag)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        reason = exc.strerror or errno.errorcode.get(exc.errno or 0, str(exc))
        raise UserError(f"{flag} {path}: cannot create the directory ({reason})") from None
    return path


def require_output_dir(path: Path, what: str) -> Path:
    """An existing output dir of a launch (dry or real); anything else is refused before reading it."""
    if not path.is_dir():
        raise UserError(f"{what}: {path}: {not_a_dir(path)}")
    from mle_world.launch.sweep_state import is_output_dir  # the launch package is not needed to plan

    if not is_output_dir(path):
        raise UserError(f"{what}: {path}: not an output dir of run_paper.py (no launch.json)")
    return path
