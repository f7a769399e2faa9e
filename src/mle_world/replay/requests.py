"""The world-model requests of recorded candidates, rebuilt with the agent's own code, each with its id.

Reads the `TrialSource`s (journals, specs, task data); writes nothing. A candidate's context is the one the
agent's `Consultant.context` built at its step: the journal as it stood before the step (the best node and
metric direction then), the trial budget then, the trial's world-model settings (full or blind context,
data preview, temperature) and the replayed endpoint's context window; the prompt is `pointwise_messages`
(or `pairwise_messages`) and the seed `request_seed`, as in agent/consult.py.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from mle_world import agent
from mle_world.records import PredictionEvent, improves
from mle_world.replay.sources import TrialSource

Mode = Literal["pointwise", "pairwise"]


class FrozenClock:
    """A clock that stands still: the budget reads exactly the time it was given (`Budget.carried_s`)."""

    def now(self) -> float:
        return 0.0


@dataclass(frozen=True)
class PointRequest:
    """One candidate's pointwise request and what its execution showed."""

    request_id: str
    trial: TrialSource
    node: agent.Node
    context: Any
    """The agent's `WorldContext` at the candidate's step."""
    messages: list[dict[str, str]]
    seed: int
    recorded: PredictionEvent
    """The recorded prediction and the outcome (`actual_improved`, `actual_buggy`)."""


@dataclass(frozen=True)
class PairRequest:
    """Two executed siblings (same parent, or both drafts) shown as A and B, and which did better."""

    request_id: str
    trial: TrialSource
    a: agent.Node
    b: agent.Node
    context: Any
    messages: list[dict[str, str]]
    seed: int
    better: Literal["A", "B"]
    """The sibling whose run improved more: the better metric; a buggy run loses to a good one."""


Request = PointRequest | PairRequest


def request_id(
    model: str, max_tokens: int, temperature: float, seed: int, messages: list[dict[str, str]]
) -> str:
    """sha256 of what the chat request sends (model, messages, temperature, max_tokens, seed): a rerun
    finds a request it already sent by its content, and another model or prompt is another request."""
    body = {
        "model": model,
        "max_tokens": max_tokens,
        "temperature": temperature,
        "seed": seed,
        "messages": messages,
    }
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def direction_before(nodes: Sequence[agent.Node], task_direction: bool | None) -> bool | None:
    """The journal's metric direction after `nodes`: the task's when known, else the reviews' running
    majority as agent/best.py's `_update_direction` keeps it (a tie keeps the current direction)."""
    if task_direction is not None:
        return task_direction
    direction: bool | None = None
    votes: list[bool] = []
    for node in nodes:
        if not node.executed or node.is_buggy:
            continue
        if node.lower_is_better is not None:
            votes.append(node.lower_is_better)
        lower, higher = votes.count(True), votes.count(False)
        direction = direction if lower == higher and direction is not None else lower > higher
    return direction


class RequestBuilder:
    """Builds the requests for one endpoint: `model` is the replayed `ChatModel` (its context window
    sizes the code shown, as in a trial), `model_id` and `max_tokens` what it sends."""

    def __init__(self, model: Any, model_id: str, max_tokens: int) -> None:
        self.model = model
        self.model_id = model_id
        self.max_tokens = max_tokens

    def consultant(self, trial: TrialSource) -> Any:
        spec = trial.spec
        facts = agent.TaskFacts(trial.task.text, trial.task.preview, trial.gpu)
        return agent.Consultant(self.model, spec.agent.world_model, facts, seed=spec.seed, regime=spec.regime)

    def context(self, trial: TrialSource, consultant: Any, group: int, parent_id: str | None) -> Any:
        """The world context the agent built for step `group`."""
        nodes = trial.checkpoint.nodes
        before = [n for n in nodes if n.group < group]
        journal = agent.Journal(before, direction_before(before, trial.spec.lower_is_better))
        used = trial.consult_time.get(group)
        if used is None:
            used = max((n.budget_time_s or 0.0 for n in before), default=0.0)
        budget = agent.Budget(trial.spec.agent.budget, FrozenClock(), carried_s=used)
        parent = journal.get(parent_id)
        return consultant.context(parent, journal, budget)

    def pointwise(self, trials: Sequence[TrialSource]) -> list[PointRequest]:
        """Every consulted candidate whose execution has an outcome, in journal order."""
        out = []
        for trial in trials:
            consultant = self.consultant(trial)
            temperature = trial.spec.agent.world_model.temperature
            for node, event in candidates(trial):
                ctx = self.context(trial, consultant, node.group, node.parent_id)
                seed = agent.request_seed(trial.spec.seed, node.group, node.candidate, 0, "predict")
                messages = agent.pointwise_messages(ctx, node)
                rid = request_id(self.model_id, self.max_tokens, temperature, seed, messages)
                out.append(PointRequest(rid, trial, node, ctx, messages, seed, event))
        return out

    def pairwise(self, trials: Sequence[TrialSource]) -> list[PairRequest]:
        """`sibling_pairs` of each trial, each with the context of the earlier sibling's step (neither
        outcome known yet); which sibling is shown as A is a seeded coin per pair."""
        out = []
        for trial in trials:
            consultant = self.consultant(trial)
            spec = trial.spec
            temperature = spec.agent.world_model.temperature
            for first, second, winner in sibling_pairs(trial):
                swap = agent.step_rng(spec.seed, first.group, f"replay-pair:{second.id}").random() < 0.5
                a, b = (second, first) if swap else (first, second)
                better: Literal["A", "B"] = "A" if winner is a else "B"
                ctx = self.context(trial, consultant, first.group, first.parent_id)
                seed = agent.request_seed(spec.seed, first.group, second.group, 0, "compare")
                messages = agent.pairwise_messages(ctx, a, b)
                rid = request_id(self.model_id, self.max_tokens, temperature, seed, messages)
                out.append(PairRequest(rid, trial, a, b, ctx, messages, seed, better))
        return out


def candidates(trial: TrialSource) -> Iterator[tuple[agent.Node, PredictionEvent]]:
    """The trial's consulted candidates whose execution has an outcome, with their PredictionEvent."""
    for node in trial.checkpoint.nodes:
        event = trial.recorded.get(node.id)
        if event is not None and event.executed and event.actual_improved is not None:
            yield node, event


def sibling_pairs(trial: TrialSource) -> Iterator[tuple[agent.Node, agent.Node, agent.Node]]:
    """(earlier, later, the one that did better): each executed node with an outcome paired with its next
    executed sibling (same parent, or both drafts), where one did better."""
    siblings: dict[str | None, list[agent.Node]] = defaultdict(list)
    for node in trial.checkpoint.nodes:
        if node.executed and node.exec_time is not None:
            siblings[node.parent_id].append(node)
    for group in siblings.values():
        for first, second in zip(group, group[1:], strict=False):
            winner = _better(first, second, trial.checkpoint.lower_is_better)
            if winner is not None:
                yield first, second, winner


def has_requests(trials: Sequence[TrialSource], mode: Mode) -> bool:
    """Whether `mode` has anything to ask of these trials (checked before any endpoint is contacted)."""
    found = candidates if mode == "pointwise" else sibling_pairs
    return any(next(iter(found(trial)), None) is not None for trial in trials)


def _better(x: agent.Node, y: agent.Node, lower_is_better: bool | None) -> agent.Node | None:
    """The sibling that did better (a good run beats a buggy one; the metric decides between good ones);
    None for a tie or two buggy runs. The journal's direction, as `records.improves` reads it."""
    good_x = not x.is_buggy and x.metric is not None
    good_y = not y.is_buggy and y.metric is not None
    if good_x != good_y:
        return x if good_x else y
    if not good_x:
        return None
    if improves(x.metric, y.metric, lower_is_better):
        return x
    if improves(y.metric, x.metric, lower_is_better):
        return y
    return None
