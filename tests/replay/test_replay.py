"""`replay` rebuilds the world-model requests the agent sent and scores a world model on them.

Runs the real agent once (an ungated trial against scripted servers on loopback) and the replay in
process; writes output dirs under tmp_path.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from agent_helpers import coder_reply, good_script, review_responder, world_reply
from fakeserver import FakeOpenAIServer, Reply
from replaykit import KnownAccuracyWorld, scripted_sweep, spec_for, task_data, write_launch

from mle_world.agent.__main__ import build_agent
from mle_world.agent.llm.client import Backoff
from mle_world.agent.prompts import WORLD_SYSTEM
from mle_world.records import WorldModelSettings
from mle_world.replay.replies import ReplayReply

pytestmark = pytest.mark.timeout(120)


REPO = Path(__file__).resolve().parents[2]


def run_replay(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`run_paper.py replay ...` in a process of its own: the scripted server answers from this one (an
    in-process command would leave the server's keep-alive connection threads running here)."""
    return subprocess.run(
        [sys.executable, str(REPO / "run_paper.py"), "replay", *argv, "--config", str(paper())],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def world_requests(server: FakeOpenAIServer) -> list[dict]:
    """The world-model requests a server got (not the endpoint check's probes)."""
    return [r for r in server.chat_requests if r["messages"][0].get("content") == WORLD_SYSTEM]


def replies(out: Path) -> list[ReplayReply]:
    return [
        ReplayReply.model_validate_json(line) for line in (out / "replies.jsonl").read_text().splitlines()
    ]


@pytest.mark.parametrize(
    ("configuration", "context", "candidates"),
    [("wm-all-stages", "full", 1), ("wm-blind", "blind", 1), ("wm-rank4", "full", 3)],
)
def test_replayed_requests_are_the_ones_the_agent_sent(
    tmp_path: Path, configuration: str, context: str, candidates: int
) -> None:
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
        world_settings = WorldModelSettings(
            enabled=True,
            candidates=candidates,
            applies_to=("draft", "debug", "improve"),
            context=context,  # type: ignore[arg-type]
            temperature=0.7,
        )
        spec = spec_for(out, public, urls=urls, configuration=configuration, world=world_settings)
        write_launch(out, "ungated", [spec.trial_id], data)
        result = build_agent(spec, backoff=Backoff(base_s=0.01, cap_s=0.05), kill_grace_s=1.0).run()
        assert result.status == "completed" and result.executed == 4
        sent = world_requests(world_server)
    assert len(sent) == 4 * candidates  # every stage is consulted

    with FakeOpenAIServer("fake-world", default=world) as replay_server:
        run = run_replay(str(out), "--world-url", replay_server.url, cwd=tmp_path)
        assert run.returncode == 0, run.stderr
        again = world_requests(replay_server)

    def key(r: dict) -> tuple:
        return (json.dumps(r["messages"]), r["seed"], r["temperature"], r["max_tokens"])

    # The replay's endpoint is another server of the same model: the same prompts, seeds and temperature,
    # for each candidate that ran (one a step; ungated, the others were not selected and have no outcome).
    assert len(again) == 4 and not Counter(map(key, again)) - Counter(map(key, sent))
    if candidates == 1:
        assert sorted(map(key, again)) == sorted(map(key, sent))
    if context == "blind":
        assert all("Parent solution" not in r["messages"][1]["content"] for r in again)
    stored = replies(out / "replay" / "fake-world")
    assert len(stored) == 4 and all(r.prediction is not None and r.prediction.valid for r in stored)
    assert (out / "replay" / "fake-world" / "replay-report.md").is_file()
    assert "World model fake-world: replayed and recorded" in run.stdout


def paper() -> Path:
    from mle_world.plan.config import packaged_config

    return packaged_config("paper.yaml")


def test_a_world_model_of_known_accuracy_is_recovered(tmp_path: Path) -> None:
    truth = scripted_sweep(tmp_path / "ungated", tmp_path / "data", trials=20, steps=20)
    accuracy = 0.7
    model = KnownAccuracyWorld(truth, accuracy, seed=3)
    with FakeOpenAIServer("scripted-70", default=model) as server:
        run = run_replay(
            str(tmp_path / "ungated"),
            "--world-url",
            server.url,
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
    # The gate at wm-point's settings (threshold 0.5, min_confidence 0.6) would have skipped each
    # candidate the model said p_improves 0.1 of (confidence 0.8): precision and recall per decision.
    flagged = [not truth[r.node_id] for r in stored if r.prediction.p_improves < 0.5]  # type: ignore[union-attr]
    worse = [r.prediction.p_improves < 0.5 for r in stored if not truth[r.node_id]]  # type: ignore[union-attr]
    gate = f"| {len(flagged)} | {sum(flagged) / len(flagged):.3f} | {sum(worse) / len(worse):.3f} |"
    assert gate in row, (gate, row)


def test_pairwise_replay_scores_siblings_and_exports_the_corpus(tmp_path: Path) -> None:
    from replaykit import KnownPairwiseWorld

    from mle_world.replay.corpus import PreferencePair

    metrics: dict[str, float | None] = {}
    scripted_sweep(tmp_path / "ungated", tmp_path / "data", trials=6, steps=12, seed=5, metrics=metrics)
    model = KnownPairwiseWorld(metrics, 0.8, seed=1)
    corpus = tmp_path / "pairs.jsonl"
    with FakeOpenAIServer("pairwise-80", default=model) as server:
        run = run_replay(
            str(tmp_path / "ungated"),
            "--world-url",
            server.url,
            "--mode",
            "pairwise",
            "--export",
            str(corpus),
            cwd=tmp_path,
        )
    assert run.returncode == 0, run.stderr
    pairs = [PreferencePair.model_validate_json(line) for line in corpus.read_text().splitlines()]
    assert pairs and len(pairs) == len(model.right)
    for pair in pairs:
        a, b = metrics[pair.a.node_id], metrics[pair.b.node_id]
        assert (pair.a.metric, pair.b.metric) == (a, b)
        assert pair.better == ("A" if b is None or (a is not None and a > b) else "B")
        assert pair.a.node_id != pair.b.node_id and pair.context.task_description.startswith("# Tiny task")
        # Siblings: the same parent (or both drafts), which the context shows.
        assert (pair.context.parent is None) == (pair.a.stage == "draft")
    stored = replies(tmp_path / "ungated" / "replay" / "pairwise-80")
    hits = sum(model.right.values())
    assert len(stored) == len(pairs) and all(r.mode == "pairwise" and r.valid for r in stored)
    report = (tmp_path / "ungated" / "replay" / "pairwise-80" / "replay-report.md").read_text()
    assert f"| wm-point | {len(pairs)} | 0 | {hits / len(pairs):.3f} |" in report


def refused(run, *needles: str) -> None:
    assert run.returncode == 2, (run.stdout, run.stderr)
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_bad_input_is_one_line_and_exit_2_with_nothing_written(tmp_path: Path, cli) -> None:
    out = tmp_path / "ungated"
    scripted_sweep(out, tmp_path / "data", trials=1, steps=4)
    journal = out / "runs" / "wm-point" / "tiny_seed100" / "journal.json"
    events = journal.with_name("events.jsonl")

    # Each input is refused before an endpoint is contacted (the dead one by the endpoint checks).
    def replay(*dirs: Path, url: str = "http://127.0.0.1:9/v1") -> object:
        return cli.run("replay", *map(str, dirs), "--world-url", url, cwd=tmp_path)

    # An unreachable endpoint, through the endpoint checks every command uses.
    refused(
        replay(out),
        "replay: world endpoint http://127.0.0.1:9/v1",
        "unreachable",
    )
    # A gated sweep holds no ground truth for vetoed candidates.
    gated = tmp_path / "gated"
    spec = spec_for(gated, task_data(tmp_path / "gdata"), regime="gated")
    write_launch(gated, "gated", [spec.trial_id], tmp_path / "gdata")
    refused(replay(gated), "no ungated trial with a world model", "1 gated")
    # No candidate with an outcome: the events say none ran.
    saved = events.read_text()
    events.write_text(saved.replace('"executed":true', '"executed":false'))
    refused(replay(out), "replay: no recorded candidates")
    events.write_text(saved)
    # A journal or a launch of another harness version.
    text = journal.read_text()
    journal.write_text(json.dumps({**json.loads(text), "version": 1}))
    refused(replay(out), f"{journal}: journal version 1", "another harness version")
    journal.write_text(text)
    spec_path = journal.with_name("spec.json")
    spec_text = spec_path.read_text()
    newer = json.loads(spec_text)
    newer["agent"]["endpoints"]["world"]["speculative_decoding"] = True  # a field of a newer harness
    spec_path.write_text(json.dumps(newer))
    refused(
        replay(out), f"{spec_path}: agent.endpoints.world.speculative_decoding", "another harness version"
    )
    spec_path.write_text(spec_text)
    launch = out / "launch.json"
    record = launch.read_text()
    launch.write_text(json.dumps({**json.loads(record), "harness_version": "0.0.9"}))
    refused(replay(out), "launch.json: launched by harness 0.0.9")
    launch.write_text(record)
    refused(replay(tmp_path / "nowhere"), "replay:", "no such directory")
    # Task data the world prompts show, missing under --data-dir.
    elsewhere = cli.run(
        "replay", str(out), "--world-url", "http://127.0.0.1:9/v1", "--data-dir", str(tmp_path), cwd=tmp_path
    )
    refused(elsewhere, f"--data-dir: {tmp_path}/tiny/prepared/public: no such directory")
    assert not (out / "replay").exists() and not (gated / "replay").exists()
