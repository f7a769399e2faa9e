"""Fixtures for the agent tests: fake endpoints on loopback and a tiny competition in tmp_path.

Reads nothing; starts threaded HTTP servers and writes under pytest's tmp_path.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_helpers import make_competition, review_responder
from fakeserver import FakeOpenAIServer


@pytest.fixture
def competition(tmp_path: Path) -> tuple[Path, Path]:
    return make_competition(tmp_path / "competition")


@pytest.fixture
def servers() -> Iterator[dict[str, FakeOpenAIServer]]:
    started = {
        "coder": FakeOpenAIServer(model="fake-coder").start(),
        "feedback": FakeOpenAIServer(model="fake-feedback", default=review_responder).start(),
        "world": FakeOpenAIServer(model="fake-world").start(),
    }
    yield started
    for server in started.values():
        server.stop()
