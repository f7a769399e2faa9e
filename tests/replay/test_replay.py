"""`replay` rebuilds the world-model requests the agent sent and scores a world model on them.

Runs the real agent once (an ungated trial against scripted servers on loopback) and the replay in
process; writes output dirs under tmp_path.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from agent_helpers import coder_reply, good_script, review_responder, world_reply
from fakeserver import FakeOpenAIServer, Reply
from replaykit import KnownAccuracyWorld, scripted_sweep, spec_for, task_data, write_launch

from mle_world.agent.__main__ import build_agent
from mle_world.agent.llm.client import Backoff
from mle_world.agent.prompts import WORLD_SYSTEM
from mle_world.replay.replies import ReplayReply

pytestmark = pytest.mark.timeout(120)


def world_requests(server: FakeOpenAIServer) -> list[dict]:
    """The world-model requests a server got (not the endpoint check's probes)."""
    return [r for r in server.chat_requests if r["messages"][0].get("content") == WORLD_SYSTEM]


def replies(out: Path) -> list[ReplayReply]:
    return [
        ReplayReply.model_validate_json(line) for line in (out / "replies.jsonl").read_text().splitlines()
    ]


def test_replayed_requests_are_the_ones_the_agent_sent(tmp_path: Path, cli) -> None:
    data = tmp_path / "data"
    public = task_data(data)
    out = tmp_path / "ungated"
    seeds = iter(range(1000))

    def coder(request: dict) -> Reply:
        n = next(seeds)
        return coder_reply(good_script(round(0.3 + n / 50, 4), tag=str(n)), f"Plan {n}.")

    def world(request: dict) -> Reply:
        return world_reply(0.4 + (int(request.get("seed") or 0) % 5) / 10, p_bug=0.2)

    with (
        FakeOpenAIServer("fake-coder", default=coder) as coder_server,
        FakeOpenAIServer("fake-feedback", default=review_responder) as feedback_server,
        FakeOpenAIServer("fake-world", default=world) as world_server,
    ):
        urls = {"coder": coder_server.url, "feedback": feedback_server.url, "world": world_server.url}
        spec = spec_for(out, public, urls=urls)
        write_launch(out, "ungated", [spec.trial_id], data)
        result = build_agent(spec, backoff=Backoff(base_s=0.01, cap_s=0.05), kill_grace_s=1.0).run()
        assert result.status == "completed" and result.executed == 4
        sent = world_requests(world_server)
    assert len(sent) == 4  # every stage is consulted, one candidate a step

    with FakeOpenAIServer("fake-world", default=world) as replay_server:
        run = cli.run(
            "replay", str(out), "--world-url", replay_server.url, "--config", str(paper()), cwd=tmp_path
        )
        assert run.returncode == 0, run.stderr
        again = world_requests(replay_server)

    def key(r: dict) -> tuple:
        return (json.dumps(r["messages"]), r["seed"], r["temperature"], r["max_tokens"])

    # The replay's endpoint is another server of the same model: the same prompts, seeds and temperature.
    assert sorted(map(key, again)) == sorted(map(key, sent))
    stored = replies(out / "replay" / "fake-world")
    assert len(stored) == 4 and all(r.prediction is not None and r.prediction.valid for r in stored)
    assert (out / "replay" / "fake-world" / "replay-report.md").is_file()
    assert "World model fake-world: replayed and recorded" in run.stdout


def paper() -> Path:
    from mle_world.plan.config import packaged_config

    return packaged_config("paper.yaml")


def test_a_world_model_of_known_accuracy_is_recovered(tmp_path: Path, cli) -> None:
    truth = scripted_sweep(tmp_path / "ungated", tmp_path / "data", trials=20, steps=20)
    accuracy = 0.7
    model = KnownAccuracyWorld(truth, accuracy, seed=3)
    with FakeOpenAIServer("scripted-70", default=model) as server:
        run = cli.run(
            "replay",
            str(tmp_path / "ungated"),
            "--world-url",
            server.url,
            "--config",
            str(paper()),
            cwd=tmp_path,
        )
    assert run.returncode == 0, run.stderr
    stored = replies(tmp_path / "ungated" / "replay" / "scripted-70")
    n = len(stored)
    assert n == len(truth) == 400
    hits = sum((r.prediction.p_improves >= 0.5) == truth[r.node_id] for r in stored)  # type: ignore[union-attr]
    # The replay scores exactly what the server answered: right where the scripted coin said so ...
    assert hits == sum(model.right.values())
    # ... and that recovers the model's accuracy within three binomial standard errors (fixed seeds).
    assert abs(hits / n - accuracy) <= 3 * math.sqrt(accuracy * (1 - accuracy) / n)
    report = (tmp_path / "ungated" / "replay" / "scripted-70" / "replay-report.md").read_text()
    row = next(line for line in report.splitlines() if line.startswith("| replayed | all |"))
    assert f"| {hits / n:.3f} |" in row
