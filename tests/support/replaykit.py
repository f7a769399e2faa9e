"""Ungated sweeps for the replay tests: one run by the real agent, and one written record by record with a
world model of known accuracy; a scripted world endpoint that is right a known share of the time.

Reads nothing; writes output dirs (launch.json, spec.json, journal.json, events.jsonl) and task data under
the paths given.
"""

from __future__ import annotations

import json
import random
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from agent_helpers import make_competition
from fakeserver import Reply, prompt_text

import mle_world
from mle_world.agent.journal import Checkpoint, Node, save_checkpoint
from mle_world.records import (
    AgentSettings,
    BudgetSettings,
    EndpointSettings,
    LaunchedTrial,
    LaunchRecord,
    Prediction,
    PredictionEvent,
    SearchSettings,
    TrialPaths,
    TrialSpec,
    WorldModelSettings,
    improves,
)

TS = datetime(2026, 1, 1, tzinfo=UTC)
MARKER = re.compile(r"# candidate ([0-9a-z-]+)")


def task_data(data_dir: Path, task: str = "tiny") -> Path:
    """MLE-bench's prepared layout under `data_dir`; returns the task's public dir."""
    public, _ = make_competition(data_dir / task / "prepared")
    return public


def write_launch(
    out: Path, regime: str, trial_ids: list[str], data_dir: Path, version: str | None = None
) -> None:
    record = LaunchRecord(
        argv=("run_paper.py",),
        harness_version=version or mle_world.__version__,
        git_sha=None,
        created_at=TS,
        regime=regime,  # type: ignore[arg-type]
        config_path="configs/paper.yaml",
        config_hash="h",
        cluster_path=None,
        backend="local",
        runtime="process",
        dry_run=False,
        sandbox=False,
        data_dir=str(data_dir),
        endpoints=(),
        trials=tuple(
            LaunchedTrial(trial_id=t, science_hash="h", trial_dir="runs/x", command="x") for t in trial_ids
        ),
    )
    data = json.loads(record.model_dump_json())
    out.mkdir(parents=True, exist_ok=True)
    (out / "launch.json").write_text(json.dumps(data))


def spec_for(
    out: Path,
    public: Path,
    *,
    regime: str = "ungated",
    configuration: str = "wm-all-stages",
    seed: int = 34,
    world: WorldModelSettings | None = None,
    urls: dict[str, str] | None = None,
    budget: BudgetSettings | None = None,
    task: str = "tiny",
) -> TrialSpec:
    trial_dir = out / "runs" / configuration / f"{task}_seed{seed}"
    trial_dir.mkdir(parents=True, exist_ok=True)
    endpoints = {
        role: EndpointSettings(url=url, timeout_s=20, outage_window_s=2.0)
        for role, url in (
            urls or {"coder": "http://127.0.0.1:9/v1", "world": "http://127.0.0.1:9/v1"}
        ).items()
    }
    spec = TrialSpec(
        trial_id=f"{regime}/{configuration}/{task}/seed{seed}",
        science_hash="abc123",
        regime=regime,  # type: ignore[arg-type]
        configuration=configuration,
        task=task,
        seed=seed,
        agent=AgentSettings(
            endpoints=endpoints,  # type: ignore[arg-type]
            budget=budget
            or BudgetSettings(
                time_limit_s=600, max_steps=4, exec_timeout_s=20, debug_timeout_s=10, min_step_s=0
            ),
            search=SearchSettings(num_drafts=2, debug_prob=1.0, max_debug_depth=3),
            stages=(),
            world_model=world
            or WorldModelSettings(enabled=True, applies_to=("draft", "debug", "improve"), temperature=0.7),
        ),
        paths=TrialPaths(trial_dir=str(trial_dir), data_dir=str(public)),
    )
    (trial_dir / "spec.json").write_text(spec.model_dump_json(indent=2))
    return spec


def scripted_sweep(
    out: Path,
    data_dir: Path,
    *,
    trials: int,
    steps: int,
    seed: int = 0,
    configuration: str = "wm-point",
    metrics: dict[str, float | None] | None = None,
) -> dict[str, bool]:
    """An ungated sweep written record by record: each trial a chain of drafts and improves, every node
    consulted and executed (ungated, one candidate a step), its outcome in events.jsonl. Returns node id →
    whether it improved (the ground truth a world model is scored on); `metrics` gets each node's metric."""
    rng = random.Random(seed)
    public = task_data(data_dir)
    truth: dict[str, bool] = {}
    ids = []
    for t in range(trials):
        world = WorldModelSettings(enabled=True, applies_to=("draft", "improve"), temperature=0.7)
        spec = spec_for(out, public, configuration=configuration, seed=100 + t, world=world)
        ids.append(spec.trial_id)
        trial_dir = Path(spec.paths.trial_dir)
        nodes: list[Node] = []
        events: list[str] = []
        best: Node | None = None
        for step in range(steps):
            node_id = f"t{t}-n{step}"
            parent = best if step >= 2 and best is not None else None
            buggy = rng.random() < 0.25
            metric = None if buggy else round(rng.random(), 4)
            improved = not buggy and improves(metric, best.metric if best else None, False)
            node = Node(
                id=node_id,
                step=step,
                stage="improve" if parent is not None else "draft",
                parent_id=parent.id if parent else None,
                group=step,
                plan=f"Plan {node_id}.",
                code=f"# candidate {node_id}\nprint('Validation metric: {metric}')\n",
                term_out=f"Validation metric: {metric}\n",
                exec_time=1.0,
                exit_code=1 if buggy else 0,
                metric=metric,
                lower_is_better=False,
                is_buggy=buggy,
                executed=True,
                gate="not_gated",
                prediction=Prediction(
                    mode="pointwise", valid=True, p_improves=0.5, p_bug=0.2, confidence=0.9
                ),
                budget_time_s=60.0 * (step + 1),
            )
            nodes.append(node)
            truth[node_id] = improved
            if metrics is not None:
                metrics[node_id] = metric
            event = PredictionEvent(
                ts=TS + timedelta(minutes=step + 1),
                node_id=node_id,
                stage=node.stage,
                step=step,
                candidate=0,
                prediction=node.prediction,  # type: ignore[arg-type]
                gate="not_gated",
                executed=True,
                actual_buggy=buggy,
                actual_improved=improved,
                actual_metric=metric,
                budget_time_s=node.budget_time_s,
            )
            events.append(event.model_dump_json())
            if improved:
                best = node
        save_checkpoint(
            trial_dir / "journal.json",
            Checkpoint(
                trial_id=spec.trial_id,
                science_hash="abc123",
                nodes=nodes,
                lower_is_better=False,
                groups=steps,
            ),
        )
        (trial_dir / "events.jsonl").write_text("\n".join(events) + "\n")
    write_launch(out, "ungated", ids, data_dir)
    return truth


def candidate_of(request: dict[str, Any]) -> str | None:
    """The node id marked in the candidate's code (not the parent's, shown before it)."""
    text = prompt_text(request)
    match = MARKER.search(text.split("Candidate solution", 1)[-1])
    return match.group(1) if match else None


class KnownAccuracyWorld:
    """A world endpoint right with probability `accuracy` per candidate (a seeded coin per node): it says
    p_improves 0.9 for a candidate it believes improves, 0.1 otherwise. `right` records each answer."""

    def __init__(self, truth: dict[str, bool], accuracy: float, seed: int = 0) -> None:
        self.truth = truth
        self.accuracy = accuracy
        self.seed = seed
        self.right: dict[str, bool] = {}

    def __call__(self, request: dict[str, Any]) -> Reply:
        node = candidate_of(request)
        if node is None:  # the endpoint check's probe
            return Reply(content="OK")
        hit = random.Random(f"{self.seed}:{node}").random() < self.accuracy
        self.right[node] = hit
        says = self.truth[node] if hit else not self.truth[node]
        body = {"p_bug": 0.2, "p_improves": 0.9 if says else 0.1, "confidence": 0.8, "rationale": "scripted"}
        return Reply(content=json.dumps(body))


def pair_of(request: dict[str, Any]) -> tuple[str, str] | None:
    """The node ids marked in a pairwise prompt's solutions A and B."""
    text = prompt_text(request)
    if "Solution A" not in text:
        return None
    a_part, b_part = text.split("Solution A", 1)[1].split("Solution B", 1)
    a, b = MARKER.search(a_part), MARKER.search(b_part)
    return (a.group(1), b.group(1)) if a and b else None


class KnownPairwiseWorld:
    """A pairwise world endpoint that names the better solution with probability `accuracy` (a seeded
    coin per pair), judging by `metric` (node id → metric, None for a buggy run; higher is better)."""

    def __init__(self, metric: dict[str, float | None], accuracy: float, seed: int = 0) -> None:
        self.metric = metric
        self.accuracy = accuracy
        self.seed = seed
        self.right: dict[tuple[str, str], bool] = {}

    def __call__(self, request: dict[str, Any]) -> Reply:
        pair = pair_of(request)
        if pair is None:
            return Reply(content="OK")
        a, b = (self.metric[n] for n in pair)
        truth = "A" if b is None or (a is not None and a > b) else "B"
        hit = random.Random(f"{self.seed}:{pair}").random() < self.accuracy
        self.right[pair] = hit
        said = truth if hit else ("B" if truth == "A" else "A")
        return Reply(content=json.dumps({"better": said, "confidence": 0.8, "rationale": "scripted"}))
