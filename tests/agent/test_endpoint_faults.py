"""Endpoint faults against scripted servers on loopback: garbage, Retry-After, hangs, replicas, the cap.

Reads nothing; talks to fake servers on loopback through the real client.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from fakeserver import BILLED, DEFAULT_USAGE, FakeOpenAIServer, Reply

from mle_world.agent.budget import Budget, MonotonicClock
from mle_world.agent.events import MemorySink
from mle_world.agent.llm.client import Backoff, EndpointClient, EndpointFailure
from mle_world.agent.llm.downtime import Downtime
from mle_world.agent.prompts import REVIEW_TOOL, REVIEW_TOOL_CHOICE
from mle_world.records import BudgetSettings, DowntimeEvent, EndpointSettings, LLMCallEvent

pytestmark = pytest.mark.timeout(60)
MSG = [{"role": "user", "content": "hi"}]
FAST = Backoff(base_s=0.02, cap_s=0.1)


class Sleeps:
    """The client's sleep: really sleeps, and remembers how long."""

    def __init__(self) -> None:
        self.seen: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.seen.append(seconds)
        time.sleep(seconds)


def make_client(
    urls: str | tuple[str, ...], sink: MemorySink, *, sleep: Sleeps | None = None, **settings: object
) -> EndpointClient:
    return EndpointClient(
        "feedback",
        EndpointSettings(url=urls, model="m", **settings),  # type: ignore[arg-type]
        sink,
        backoff=FAST,
        sleep=sleep or Sleeps(),
        probe_timeout_s=2.0,
    )


def calls(sink: MemorySink) -> list[LLMCallEvent]:
    return [e for e in sink.events if isinstance(e, LLMCallEvent)]


@pytest.mark.parametrize(
    "garbage", ["html", "truncated", "no_choices", "bad_tool_args", "wrong_content_type"]
)
def test_protocol_garbage_is_retried_as_an_endpoint_fault(garbage):
    sink = MemorySink()
    with FakeOpenAIServer() as server:
        server.push(
            Reply(garbage=garbage), Reply(tool_call=("submit_review", {"is_bug": False}), usage=(3, 2))
        )
        client = make_client(server.url, sink, outage_window_s=30)
        reply = client.chat(MSG, purpose="review", tools=[REVIEW_TOOL], tool_choice=REVIEW_TOOL_CHOICE)
    assert reply.tool_arguments == '{"is_bug": false}' and reply.prompt_tokens == 3
    first, second = calls(sink)
    assert first.outcome == "retry" and "protocol garbage" in (first.error or "")
    # Unknown is not zero; an unusable answer that says what it cost is billed (DEFAULT_USAGE).
    assert first.prompt_tokens == (DEFAULT_USAGE[0] if garbage in BILLED else None)
    assert second.outcome == "ok"


def test_a_server_that_never_reports_usage_is_used_with_unknown_tokens_and_one_warning(caplog):
    """Some OpenAI-compatible servers and proxies omit `usage`: that failed every call as protocol
    garbage until the outage window ran out and the trial failed as infra. The completion is used; its
    tokens are unknown (None, never 0) and the endpoint is named in one warning, not one per call."""
    sink = MemorySink()
    caplog.set_level("WARNING", logger="mle_world.agent.llm.client")
    with FakeOpenAIServer(default=Reply(content="fine", usage=None)) as server:
        client = make_client(server.url, sink, outage_window_s=0.5)
        replies = [client.chat(MSG, purpose="draft") for _ in range(3)]
        url = server.url
    assert [r.content for r in replies] == ["fine"] * 3
    assert {(r.prompt_tokens, r.completion_tokens) for r in replies} == {(None, None)}
    assert [(e.outcome, e.prompt_tokens, e.completion_tokens) for e in calls(sink)] == [
        ("ok", None, None)
    ] * 3
    warnings = [r.getMessage() for r in caplog.records if "without token usage" in r.getMessage()]
    assert len(warnings) == 1 and url.rstrip("/") in warnings[0] and warnings[0].startswith("feedback")


def test_unusable_tool_arguments_are_resampled_with_the_next_seed_and_outages_keep_it():
    """A seeded request samples the same broken output again: retry it with seed + 1, + 2, ...;
    a server fault (500) is not the model's output, so its retry keeps the seed."""
    with FakeOpenAIServer() as server:
        good = Reply(tool_call=("submit_review", {"is_bug": False}), usage=(3, 2))
        server.push(Reply(garbage="bad_tool_args"), Reply(status=500), Reply(garbage="bad_tool_args"), good)
        client = make_client(server.url, MemorySink(), outage_window_s=30)
        reply = client.chat(
            MSG, purpose="review", tools=[REVIEW_TOOL], tool_choice=REVIEW_TOOL_CHOICE, seed=40
        )
    assert reply.tool_arguments == '{"is_bug": false}'
    assert [r["seed"] for r in server.chat_requests] == [40, 41, 41, 42]


def test_an_unusable_answer_keeps_the_usage_the_server_billed():
    """A 200 without choices still says what it cost: the retry event carries it (no lost usage), and the
    answer that is used is counted once."""
    sink = MemorySink()
    with FakeOpenAIServer() as server:
        server.push(Reply(garbage="no_choices", usage=(40, 7)), Reply(content="fine", usage=(3, 2)))
        client = make_client(server.url, sink, outage_window_s=30)
        assert client.chat(MSG, purpose="draft").content == "fine"
    assert [(e.outcome, e.prompt_tokens, e.completion_tokens) for e in calls(sink)] == [
        ("retry", 40, 7),
        ("ok", 3, 2),
    ]


def test_content_that_is_not_text_is_garbage_not_a_reply():
    """The SDK does not validate a completion: a list as the content reached the coder's code parser and
    failed the trial as the agent's error."""
    sink = MemorySink()
    with FakeOpenAIServer() as server:
        server.push(Reply(content=[{"type": "text", "text": "hi"}]), Reply(content="fine"))  # type: ignore[arg-type]
        assert make_client(server.url, sink, outage_window_s=30).chat(MSG, purpose="draft").content == "fine"
    assert "message content is not text" in (calls(sink)[0].error or "")


def test_persistent_garbage_fails_with_the_cause_after_the_window():
    sink = MemorySink()
    with FakeOpenAIServer(default=Reply(garbage="html")) as server:
        client = make_client(server.url, sink, outage_window_s=0.5)
        with pytest.raises(EndpointFailure, match="protocol garbage: content type 'text/html'"):
            client.chat(MSG, purpose="draft")
        assert len(server.chat_requests) >= 2
    assert calls(sink)[-1].outcome == "error"


def test_retry_after_is_honoured():
    sink, sleeps = MemorySink(), Sleeps()
    with FakeOpenAIServer(default="fine") as server:
        server.outage(1.0, "429", retry_after_s=0.4)
        client = make_client(server.url, sink, sleep=sleeps, outage_window_s=30)
        assert client.chat(MSG, purpose="draft").content == "fine"
    # Backoff alone would wait at most 0.1 s; every wait after a 429 respects the server's 0.4 s.
    waits = [s for s in sleeps.seen if s > 0]
    assert waits and all(s >= 0.3 for s in waits)
    assert [e.outcome for e in calls(sink)][-1] == "ok"


def test_a_hung_server_is_cut_by_time_left_plus_the_window():
    sink = MemorySink()
    with FakeOpenAIServer(default=Reply(content="late", delay_s=30)) as server:
        client = make_client(server.url, sink, outage_window_s=0.5, timeout_s=600)
        # 1 s left in the trial: the request may not wait for the server's 30 s answer.
        with pytest.raises(EndpointFailure, match="timed out"):
            client.chat(MSG, purpose="draft", timeout_s=1.0)


def test_a_trickling_response_is_cut_by_its_timeout():
    """httpx's read timeout limits each wait for bytes: a body sent a byte at a time (a gateway's
    keep-alive) held the request for as long as the server liked (here about 90 s; the test's 60 s
    timeout fails it), past the attempt's timeout and the trial's deadline."""
    sink = MemorySink()
    with FakeOpenAIServer(default=Reply(content="x" * 200, trickle_s=0.25)) as server:
        client = make_client(server.url, sink, outage_window_s=0.5, timeout_s=1)
        with pytest.raises(EndpointFailure, match="APITimeoutError: request timed out"):
            client.chat(MSG, purpose="draft", timeout_s=1.0)
    assert calls(sink)[-1].outcome == "error"


def test_outage_pauses_the_budget_and_is_recorded():
    sink = MemorySink()
    clock = MonotonicClock()
    downtime = Downtime(clock, sink)
    t0 = clock.now()
    budget = Budget(BudgetSettings(time_limit_s=100), clock, paused=downtime.paused_s)
    with FakeOpenAIServer(default="back") as server:
        server.outage(1.0, "500")
        client = EndpointClient(
            "coder",
            EndpointSettings(url=server.url, model="m", outage_window_s=30),
            sink,
            backoff=FAST,
            outages=downtime,
        )
        start = clock.now()
        assert client.chat(MSG, purpose="draft").content == "back"
        wall = clock.now() - start
    down, up = [e for e in sink.events if isinstance(e, DowntimeEvent)]
    assert (down.role, down.phase, up.phase) == ("coder", "down", "up")
    assert up.downtime_s is not None and 0.5 < up.downtime_s <= wall
    # The budget saw only the time outside the outage.
    assert downtime.paused_s() == pytest.approx(up.downtime_s, abs=1e-6)
    used = budget.used()
    assert used < (clock.now() - t0) - 0.5


def test_requests_spread_over_replicas_and_fail_over_and_come_back():
    sink = MemorySink()
    with FakeOpenAIServer(default="a") as a, FakeOpenAIServer(default="b") as b:
        client = make_client((a.url, b.url), sink, outage_window_s=30)
        for _ in range(20):
            client.chat(MSG, purpose="draft")
        # Sequential requests alternate: 10 each (tolerance: at most one apart).
        assert abs(len(a.chat_requests) - len(b.chat_requests)) <= 1
        port = a.port
        a.stop()
        before_b = len(b.chat_requests)
        for _ in range(10):
            assert client.chat(MSG, purpose="draft").content == "b"
        assert len(b.chat_requests) - before_b == 10  # every request after the failover went to b
        assert [r.healthy for r in client.pool.replicas] == [False, True]
        # The dead replica is probed back once it serves again.
        with FakeOpenAIServer(default="a again", port=port) as again:
            deadline = time.monotonic() + 20
            while not again.chat_requests and time.monotonic() < deadline:
                client.chat(MSG, purpose="draft")
                time.sleep(0.05)
            assert again.chat_requests and client.pool.replicas[0].healthy
    # No request failed: the one that hit the dead replica was retried on the live one.
    assert all(e.outcome in ("ok", "retry") for e in calls(sink)) and not client.pool.down


def test_concurrent_requests_are_spread_by_outstanding_requests():
    sink = MemorySink()
    with FakeOpenAIServer(default="a", latency_s=0.2) as a, FakeOpenAIServer(default="b", latency_s=0.2) as b:
        client = make_client((a.url, b.url), sink, outage_window_s=30, max_concurrent=4)
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda _: client.chat(MSG, purpose="draft"), range(16)))
        # Least outstanding requests: never more than 2 of the 4 in flight on one replica.
        assert a.max_in_flight <= 2 and b.max_in_flight <= 2
        assert len(a.chat_requests) == len(b.chat_requests) == 8


def test_per_role_cap_on_concurrent_requests():
    sink = MemorySink()
    with FakeOpenAIServer(default="x", latency_s=0.2) as server:
        client = make_client(server.url, sink, outage_window_s=30, max_concurrent=2)
        threads = [
            threading.Thread(target=client.chat, args=(MSG,), kwargs={"purpose": "draft"}) for _ in range(6)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(server.chat_requests) == 6 and server.max_in_flight == 2
