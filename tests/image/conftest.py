"""Fixtures of the image tests.

Reads PATH; writes nothing.
"""

from __future__ import annotations

import pytest
from image_helpers import require_tool


@pytest.fixture
def squashfs_tools() -> None:
    """Fail (not skip) early when squashfs-tools is missing."""
    require_tool("mksquashfs")
    require_tool("unsquashfs")
