"""Runs a command in a mount namespace of its own with a small tmpfs mounted at a given directory, so
that a test can fill a file system without touching the host's.

Reads nothing; the tmpfs (and whatever was written to it) is gone when the command exits.
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest


def in_private_tmpfs(
    mountpoint: Path, argv: list[str], *, size: str = "2m", cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`argv` run with a tmpfs of `size` at `mountpoint` (made here); skips where no namespace is allowed."""
    mountpoint.mkdir(parents=True)
    where = shlex.quote(str(mountpoint))
    script = f"mount -t tmpfs -o size={size},mode=755 tmpfs {where} && exec {shlex.join(argv)}"
    for prefix in (["unshare", "--mount", "--propagation", "private"], ["unshare", "-rm"]):
        probe = subprocess.run([*prefix, "sh", "-c", f"mount -t tmpfs tmpfs {where}"], check=False)
        if probe.returncode == 0:
            return subprocess.run(
                [*prefix, "sh", "-c", script],
                capture_output=True,
                text=True,
                timeout=120,
                cwd=cwd,
                check=False,
            )
    pytest.skip("no mount namespace with a tmpfs here (unshare/mount refused)")
