"""Fixtures of the endpoint tests: the suite's fake OpenAI server (tests/support/fakeserver.py) dressed as
a vLLM or llama.cpp server, and a dead URL.

Reads nothing; starts threaded HTTP servers on loopback.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fakeserver import FakeOpenAIServer


@pytest.fixture
def start_server() -> Iterator[Callable[..., FakeOpenAIServer]]:
    """Yields `start(models=..., max_model_len=..., tools=..., required_key=...) -> FakeOpenAIServer`
    answering like vLLM (unknown model → 404, forced tool choice → that tool's call); every started
    server is stopped. `tools=False` answers requests with tools by HTTP 400; `max_model_len=None`
    mimics llama.cpp (field absent)."""
    started: list[FakeOpenAIServer] = []

    def start(
        models: tuple[str, ...] = ("test-model",),
        max_model_len: int | None = 32768,
        tools: bool = True,
        required_key: str | None = None,
        **extra: Any,
    ) -> FakeOpenAIServer:
        server = FakeOpenAIServer(
            models[0],
            also_serves=models[1:],
            max_model_len=max_model_len,
            reject_tools=not tools,
            required_key=required_key,
            known_models_only=True,
            echo_tools=True,
            **extra,
        ).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def dead_url() -> str:
    """A loopback URL on a port nothing listens on (bound, then closed)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"
