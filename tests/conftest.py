"""Shared pytest fixtures and options for the whole suite.

Reads nothing but the repository; writes only under pytest's tmp paths.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO / "tests") not in sys.path:
    sys.path.insert(0, str(REPO / "tests"))


@pytest.fixture
def repo() -> Path:
    return REPO
