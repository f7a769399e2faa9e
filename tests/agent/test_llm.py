"""Endpoint client and fake server tests: discovery, retries, error mapping, events, keys.

Reads nothing; talks to fake servers on loopback.
"""

from __future__ import annotations

import pytest
from fakeserver import FakeOpenAIServer, Reply

from mle_world.agent.events import MemorySink
from mle_world.agent.llm import Backoff, EndpointClient, EndpointFailure, ToolsUnsupported
from mle_world.agent.prompts import REVIEW_TOOL, REVIEW_TOOL_CHOICE
from mle_world.records import EndpointSettings, LLMCallEvent

pytestmark = pytest.mark.timeout(30)
MSG = [{"role": "user", "content": "hi"}]


def client(server: FakeOpenAIServer, sink: MemorySink, **settings: object) -> EndpointClient:
    sleeps: list[float] = []
    c = EndpointClient(
        "coder",
        EndpointSettings(url=server.url, **settings),  # type: ignore[arg-type]
        sink,
        backoff=Backoff(base_s=1.0, cap_s=4.0),
        sleep=sleeps.append,
        environ={"MY_KEY": "k-123"},
    )
    c.sleeps = sleeps  # type: ignore[attr-defined]
    return c


def test_discovers_model_and_records_usage_and_key():
    sink = MemorySink()
    with FakeOpenAIServer(model="served-id") as server:
        server.push(Reply(content="a", usage=(7, 3)))
        c = client(server, sink, key_env="MY_KEY")
        reply = c.chat(MSG, purpose="draft")
        assert reply.content == "a" and reply.model == "served-id"
        assert (reply.prompt_tokens, reply.completion_tokens) == (7, 3)
        assert server.chat_requests[0]["_auth"] == "Bearer k-123"
        assert server.chat_requests[0]["model"] == "served-id"
    (event,) = sink.events
    assert isinstance(event, LLMCallEvent) and event.outcome == "ok" and event.purpose == "draft"


def test_bounded_retries_with_backoff_then_failure():
    sink = MemorySink()
    with FakeOpenAIServer() as server:
        server.fail_next(10, status=500)
        c = client(server, sink, model="m", max_retries=3)
        with pytest.raises(EndpointFailure, match="gave up after 4 attempts"):
            c.chat(MSG, purpose="draft")
        assert len(server.chat_requests) == 4
    assert [e.outcome for e in sink.events] == ["retry", "retry", "retry", "error"]
    sleeps = c.sleeps  # type: ignore[attr-defined]
    assert len(sleeps) == 3 and all(0 <= s <= cap for s, cap in zip(sleeps, (1, 2, 4), strict=True))


def test_429_is_retried_and_400_is_not():
    sink = MemorySink()
    with FakeOpenAIServer() as server:
        server.fail_next(1, status=429)
        c = client(server, sink, model="m")
        assert c.chat(MSG, purpose="draft").content == "(no scripted reply)"
        server.push(Reply(status=400, error_message="maximum context length exceeded"))
        with pytest.raises(EndpointFailure, match="request rejected"):
            c.chat(MSG, purpose="draft")
    assert [e.outcome for e in sink.events] == ["retry", "ok", "error"]


def test_tool_rejection_is_distinguished():
    sink = MemorySink()
    with FakeOpenAIServer(reject_tools=True) as server:
        c = client(server, sink, model="m")
        with pytest.raises(ToolsUnsupported):
            c.chat(MSG, purpose="review", tools=[REVIEW_TOOL], tool_choice=REVIEW_TOOL_CHOICE)
        assert c.chat(MSG, purpose="review").content == "(no scripted reply)"


def test_tool_call_arguments_are_returned():
    sink = MemorySink()
    with FakeOpenAIServer() as server:
        server.push(Reply(tool_call=("submit_review", {"is_bug": True}), usage=None))
        c = client(server, sink, model="m")
        reply = c.chat(MSG, purpose="review", tools=[REVIEW_TOOL], tool_choice=REVIEW_TOOL_CHOICE)
        assert reply.tool_arguments == '{"is_bug": true}' and reply.prompt_tokens is None
        assert server.chat_requests[0]["tool_choice"] == REVIEW_TOOL_CHOICE


def test_dead_endpoint_fails_discovery():
    server = FakeOpenAIServer()
    server.stop()
    with pytest.raises(EndpointFailure, match="model discovery failed"):
        client(server, MemorySink(), max_retries=1).chat(MSG, purpose="draft")
