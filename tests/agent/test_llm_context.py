"""Endpoint client: per-request seed, context length from /v1/models or config, context-length 400.

Reads nothing; talks to fake servers on loopback.
"""

from __future__ import annotations

import pytest
from fakeserver import FakeOpenAIServer, Reply

from mle_world.agent.events import MemorySink
from mle_world.agent.llm.client import ContextOverflow, EndpointClient
from mle_world.records import EndpointSettings

pytestmark = pytest.mark.timeout(30)
MSG = [{"role": "user", "content": "hi"}]
VLLM_400 = (
    "This model's maximum context length is 2048 tokens. However, you requested 3000 tokens "
    "(2000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion."
)


def client(server: FakeOpenAIServer, **settings: object) -> EndpointClient:
    return EndpointClient("coder", EndpointSettings(url=server.url, **settings), MemorySink())  # type: ignore[arg-type]


def test_seed_is_sent_with_the_request():
    with FakeOpenAIServer() as server:
        c = client(server)
        c.chat(MSG, purpose="draft", seed=1234)
        c.chat(MSG, purpose="draft")
        assert server.chat_requests[0]["seed"] == 1234
        assert "seed" not in server.chat_requests[1]


@pytest.mark.parametrize(("configured", "served", "expected"), [(None, 4096, 4096), (1000, 4096, 1000)])
def test_context_length_from_models_or_config(configured, served, expected):
    with FakeOpenAIServer(max_model_len=served) as server:
        assert client(server, context_length=configured).context_length() == expected
        assert client(server, model="fake-model", context_length=configured).context_length() == expected


def test_unknown_context_length_is_none():
    with FakeOpenAIServer(max_model_len=None) as server:
        assert client(server).context_length() is None


@pytest.mark.parametrize(
    "message",
    [
        VLLM_400,
        # vLLM's current server-side check, and its engine's (reached when the server's does not catch it).
        "This model's maximum context length is 32768 tokens. However, you requested 8192 output tokens and your "
        "prompt contains at least 24577 input tokens, for a total of at least 32769 tokens. Please reduce the "
        "length of the input prompt or the number of requested output tokens.",
        "The decoder prompt (length 40000) is longer than the maximum model length of 32768. Make sure that "
        "`max_model_len` is no smaller than the number of text tokens.",
        "The decoder prompt (length 32768) plus the number of requested output tokens (at least 1) is longer "
        "than the maximum model length of 32768. Make sure that `max_model_len` is no smaller than the number "
        "of text tokens (prompt + requested output tokens).",
        "the request exceeds the available context size, try increasing it",
        "context_length_exceeded",
        "Requested tokens (5000) exceed context window of 4096",
    ],
)
def test_context_400_is_its_own_error(message):
    with FakeOpenAIServer() as server:
        server.push(Reply(status=400, error_message=message))
        with pytest.raises(ContextOverflow):
            client(server).chat(MSG, purpose="draft")
        assert len(server.chat_requests) == 1  # never retried as such: the caller shrinks the prompt
