"""Fixtures of the image tests.

Reads PATH; writes nothing.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from image_helpers import require_tool  # noqa: E402


@pytest.fixture
def squashfs_tools() -> None:
    """Fail (not skip) early when squashfs-tools is missing."""
    require_tool("mksquashfs")
    require_tool("unsquashfs")
