"""A replay killed with SIGKILL halfway resumes without sending an answered request again, counted at a real
loopback server; a torn last line of replies.jsonl is cut off, not taken for an answer.

Starts `run_paper.py replay` as a real subprocess (killed, then rerun) against tests/support's fake server in
this process; writes an output dir under tmp_path.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from fakeserver import FakeOpenAIServer, Reply
from replaykit import KnownAccuracyWorld, candidate_of, scripted_sweep

from mle_world.plan.config import packaged_config
from mle_world.replay.replies import ReplayReply, ReplyStore

pytestmark = pytest.mark.timeout(180)
REPO = Path(__file__).resolve().parents[2]
ANSWER_FIRST = 9
"""Requests the server answers in the first run; it holds every later one until the replay is killed."""


def content_key(request: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps([request["messages"], request.get("seed")]).encode()).hexdigest()


class HoldingWorld:
    """Answers the first `answer_first` world requests, then holds each later one until `release`."""

    def __init__(self, truth: dict[str, bool], answer_first: int | None) -> None:
        self.model = KnownAccuracyWorld(truth, 0.7)
        self.answer_first = answer_first
        self.answered: list[str] = []
        self.received: list[str] = []
        self.release = threading.Event()
        self.lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> Reply:
        if candidate_of(request) is None:
            return Reply(content="OK")  # the endpoint check's probes
        key = content_key(request)
        with self.lock:
            self.received.append(key)
            hold = self.answer_first is not None and len(self.answered) >= self.answer_first
            if not hold:
                self.answered.append(key)
        if hold:
            self.release.wait(60)
            return Reply(status=503, error_message="held past the kill")
        return self.model(request)


def replay_command(out: Path, url: str) -> list[str]:
    config = str(packaged_config("paper.yaml"))
    return [
        sys.executable,
        str(REPO / "run_paper.py"),
        "replay",
        str(out),
        "--world-url",
        url,
        "--config",
        config,
    ]


def lines_of(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def test_a_replay_killed_halfway_resumes_without_sending_an_answered_request_again(tmp_path: Path) -> None:
    out = tmp_path / "ungated"
    truth = scripted_sweep(out, tmp_path / "data", trials=4, steps=8)
    replies = out / "replay" / "scripted" / "replies.jsonl"
    first = HoldingWorld(truth, ANSWER_FIRST)
    with FakeOpenAIServer("scripted", default=first) as server:
        proc = subprocess.Popen(
            [*replay_command(out, server.url), "--concurrency", "4"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            # Wait (no timing assumed) until every answer of the first run is on disk and the replay
            # waits on held requests, then kill it as a machine or OOM killer would.
            deadline = time.monotonic() + 120
            while proc.poll() is None and time.monotonic() < deadline:
                if lines_of(replies) >= ANSWER_FIRST and len(first.received) > ANSWER_FIRST:
                    break
                time.sleep(0.05)
            assert lines_of(replies) == ANSWER_FIRST, (
                proc.stderr.read().decode() if proc.poll() is not None else ""
            )
            os.kill(proc.pid, signal.SIGKILL)
            assert proc.wait(30) == -signal.SIGKILL
        finally:
            if proc.poll() is None:
                proc.kill()
            first.release.set()
            proc.stderr.close()  # type: ignore[union-attr]
        held = set(first.received) - set(first.answered)
        assert held  # requests were in flight when it died: sent, never answered

    second = HoldingWorld(truth, None)
    with FakeOpenAIServer("scripted", default=second) as server:
        rerun = subprocess.run(replay_command(out, server.url), capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr
    said = " ".join(rerun.stdout.split())  # rich wraps the line where the output is no terminal
    assert f"{len(truth) - ANSWER_FIRST} request(s) sent (" in said
    assert f"0 failed attempt(s) retried), {ANSWER_FIRST} answered by an earlier run" in said
    # No request answered in the first run was sent again; every request was answered once in all.
    assert not set(second.received) & set(first.answered)
    assert Counter(second.received) == Counter(second.answered)
    assert len(second.received) == len(set(second.received)) == len(truth) - ANSWER_FIRST
    assert len(set(first.answered) | set(second.answered)) == len(truth)
    # Only the requests in flight at the kill reached the server twice (sent, then never answered).
    assert set(first.received) & set(second.received) == held
    stored = [ReplayReply.model_validate_json(line) for line in replies.read_text().splitlines()]
    assert len(stored) == len({r.request_id for r in stored}) == len(truth)


def test_a_torn_last_line_is_cut_off_and_its_request_counts_as_not_done(tmp_path: Path) -> None:
    path = tmp_path / "replies.jsonl"
    reply = ReplayReply(
        request_id="a" * 64,
        trial_id="ungated/wm-point/tiny/seed34",
        mode="pointwise",
        node_id="n1",
        model="m",
        ts="2026-01-01T00:00:00Z",  # type: ignore[arg-type]
    )
    whole = reply.model_dump_json() + "\n"
    torn = reply.model_copy(update={"request_id": "b" * 64}).model_dump_json()[:40]
    path.write_text(whole + torn)
    store = ReplyStore(path)
    assert "a" * 64 in store and "b" * 64 not in store
    assert path.read_text() == whole
    store.append(reply.model_copy(update={"request_id": "c" * 64}))
    assert [
        ReplayReply.model_validate_json(line).request_id[0] for line in path.read_text().splitlines()
    ] == ["a", "c"]
