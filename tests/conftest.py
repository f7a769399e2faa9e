"""Shared pytest fixtures and options for the whole suite.

Reads nothing but the repository; writes only under pytest's tmp paths.
"""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def repo() -> Path:
    return REPO
