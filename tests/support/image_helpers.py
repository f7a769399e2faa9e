"""Shared helpers of the image tests: paths of the repo's scripts, tool checks.

Reads nothing but PATH; writes nothing.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "scripts" / "image" / "build_aide_enroot.sh"

DEBIAN_PACKAGE = {
    "mksquashfs": "squashfs-tools",
    "unsquashfs": "squashfs-tools",
    "shellcheck": "shellcheck",
    "rsync": "rsync",
    "busybox": "busybox-static",
}


def require_tool(name: str) -> str:
    """Path of `name`, or fail (not skip) saying which Debian package to install."""
    path = shutil.which(name)
    if path is None:
        package = DEBIAN_PACKAGE.get(name, name)
        pytest.fail(f"{name} not found: apt-get install -y --no-install-recommends {package}")
    return path
