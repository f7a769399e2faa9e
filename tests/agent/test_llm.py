"""Endpoint client and fake server tests: discovery, retries, error mapping, events, keys.

Reads nothing; talks to fake servers on loopback.
"""

from __future__ import annotations

import time

import openai
import pytest
from fakeserver import FakeOpenAIServer, Reply

from mle_world.agent.events import MemorySink
from mle_world.agent.llm.client import Backoff, EndpointClient, EndpointFailure, ToolsUnsupported
from mle_world.agent.prompts import REVIEW_TOOL, REVIEW_TOOL_CHOICE
from mle_world.records import EndpointSettings, LLMCallEvent

pytestmark = pytest.mark.timeout(30)
MSG = [{"role": "user", "content": "hi"}]


def client(server: FakeOpenAIServer, sink: MemorySink, **settings: object) -> EndpointClient:
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        time.sleep(seconds)

    c = EndpointClient(
        "coder",
        EndpointSettings(url=server.url, **settings),
        sink,
        backoff=Backoff(base_s=0.01, cap_s=0.04),
        sleep=sleep,
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
    assert event.served_model is None  # the server answered as the model asked for


def test_a_completion_reporting_another_model_is_recorded():
    """A gateway answering an alias with another model: events.jsonl says which model answered."""
    sink = MemorySink()
    with FakeOpenAIServer(model="llama-latest", answers_as="llama-3.1-70b-instruct") as server:
        server.push(Reply(content="a", usage=(7, 3)))
        client(server, sink).chat(MSG, purpose="draft")
    (event,) = sink.events
    assert isinstance(event, LLMCallEvent)
    assert (event.model, event.served_model) == ("llama-latest", "llama-3.1-70b-instruct")


def test_retries_are_bounded_by_the_outage_window_with_jittered_backoff():
    sink = MemorySink()
    with FakeOpenAIServer() as server:
        server.fail_next(10_000, status=500)
        c = client(server, sink, model="m", outage_window_s=0.5)
        with pytest.raises(
            EndpointFailure, match=r"gave up after [\d.]+ s and \d+ attempts: .*InternalServerError"
        ):
            c.chat(MSG, purpose="draft")
        attempts = len(server.chat_requests)
    outcomes = [e.outcome for e in sink.events if isinstance(e, LLMCallEvent)]
    assert attempts >= 3 and outcomes == ["retry"] * (attempts - 1) + ["error"]
    sleeps = c.sleeps  # type: ignore[attr-defined]
    # Full jitter under a cap that doubles per failure (0.01, 0.02, 0.04, 0.04, ...).
    caps = [min(0.04, 0.01 * 2**i) for i in range(len(sleeps))]
    assert all(0 <= s <= cap + 1e-9 for s, cap in zip(sleeps, caps, strict=True))


def test_429_is_retried_and_400_is_not():
    sink = MemorySink()
    with FakeOpenAIServer() as server:
        server.fail_next(1, status=429)
        c = client(server, sink, model="m")
        assert c.chat(MSG, purpose="draft").content == "(no scripted reply)"
        server.push(Reply(status=400, error_message="temperature must be non-negative"))
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
        server.push(Reply(tool_call=("submit_review", {"is_bug": True}), usage=(9, 4)))
        c = client(server, sink, model="m")
        reply = c.chat(MSG, purpose="review", tools=[REVIEW_TOOL], tool_choice=REVIEW_TOOL_CHOICE)
        assert reply.tool_arguments == '{"is_bug": true}' and reply.prompt_tokens == 9
        assert server.chat_requests[0]["tool_choice"] == REVIEW_TOOL_CHOICE


def test_chat_sends_the_body_the_sdks_create_sends():
    """chat()'s request is the one the SDK's create() sends for the same parameters (tools, seed)."""
    messages = [
        {"role": "system", "content": "You are a Kaggle grandmaster. \u00e9\u4e2d"},
        {"role": "user", "content": "Review this:\n```python\nprint(1)\n```"},
        {"role": "assistant", "content": "ok"},
    ]
    with FakeOpenAIServer() as server:
        c = client(server, MemorySink(), model="m", key_env="MY_KEY", temperature=0.3, max_tokens=77)
        c.chat(messages, purpose="review", tools=[REVIEW_TOOL], tool_choice=REVIEW_TOOL_CHOICE, seed=5)
        c.chat(messages, purpose="draft")
        sdk = openai.OpenAI(base_url=server.url, api_key="k-123", max_retries=0)
        sdk.chat.completions.with_raw_response.create(
            model="m",
            messages=messages,
            temperature=0.3,
            max_tokens=77,
            seed=5,
            tools=[REVIEW_TOOL],
            tool_choice=REVIEW_TOOL_CHOICE,
        ).parse()
        sdk.chat.completions.create(model="m", messages=messages, temperature=0.3, max_tokens=77)
        ours_tools, ours_plain, sdk_tools, sdk_plain = server.chat_requests
    assert ours_tools == sdk_tools and ours_plain == sdk_plain
    assert ours_tools["tools"] == [REVIEW_TOOL] and ours_tools["seed"] == 5 and "tools" not in ours_plain


def test_dead_endpoint_fails_discovery():
    server = FakeOpenAIServer()
    server.stop()
    with pytest.raises(EndpointFailure, match="model discovery failed: .*APIConnectionError"):
        client(server, MemorySink(), outage_window_s=0.3).chat(MSG, purpose="draft")
