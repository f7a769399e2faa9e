"""Replay: recorded candidates' world-model requests rebuilt from ungated trials and sent to any world model.

Reads ungated output dirs (journals, specs, events, task data); writes only its own --out dir (the replies,
the report) and, with --export, the preference corpus; it never touches the trials. `cli/replay.py` builds
the endpoint client and calls `replay`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from mle_world import layout
from mle_world.errors import UserError
from mle_world.replay.corpus import write_corpus
from mle_world.replay.replies import ReplyStore
from mle_world.replay.requests import PairRequest, PointRequest, RequestBuilder, has_requests
from mle_world.replay.scoring import Scores, report_markdown, score
from mle_world.replay.sending import EndpointDown, Progress, SendResult, send_all
from mle_world.replay.sources import Sources, load_sources
from mle_world.storage import write_text_atomic

__all__ = [
    "EndpointDown",
    "Plan",
    "ReplayOutcome",
    "load_sources",
    "plan_replay",
    "require_requests",
    "run_plan",
]


@dataclass(frozen=True)
class Plan:
    """What a replay will send, built before anything is written."""

    sources: Sources
    points: list[PointRequest]
    pairs: list[PairRequest]
    model_id: str

    @property
    def requests(self) -> list[PointRequest | PairRequest]:
        return [*self.points, *self.pairs]


@dataclass(frozen=True)
class ReplayOutcome:
    sent: SendResult
    scores: Scores
    written: tuple[Path, ...]


def require_requests(sources: Sources, mode: Literal["pointwise", "pairwise"]) -> None:
    """A UserError when `mode` has nothing to replay in these trials (before any endpoint is contacted)."""
    if not has_requests(sources.trials, mode):
        what = (
            "consulted candidate whose execution has an outcome"
            if mode == "pointwise"
            else "pair of executed siblings of which one did better"
        )
        raise UserError(
            f"replay: no recorded candidates: {len(sources.trials)} ungated trial(s) hold no {what}"
        )


def plan_replay(
    sources: Sources,
    model: Any,
    model_id: str,
    max_tokens: int,
    mode: Literal["pointwise", "pairwise"],
    pairs_too: bool,
) -> Plan:
    """The requests of `mode` (and the pairs, for an export)."""
    builder = RequestBuilder(model, model_id, max_tokens)
    points = builder.pointwise(sources.trials) if mode == "pointwise" else []
    pairs = builder.pairwise(sources.trials) if mode == "pairwise" or pairs_too else []
    return Plan(sources, points, pairs if mode == "pairwise" or pairs_too else [], model_id)


def run_plan(
    plan: Plan,
    model: Any,
    out: layout.ReplayFiles,
    *,
    mode: Literal["pointwise", "pairwise"],
    concurrency: int,
    inputs: Sequence[str],
    export: Path | None = None,
    progress: Progress | None = None,
) -> ReplayOutcome:
    """Export the corpus (first: it needs no reply), send what replies.jsonl lacks, score, write the report.

    `EndpointDown` when the endpoint fails past its outage window: the replies so far are kept; a rerun
    sends the rest.
    """
    written: list[Path] = []
    if export is not None:
        write_corpus(export, plan.pairs)
        written.append(export)
    store = ReplyStore(out.replies)
    requests = plan.points if mode == "pointwise" else plan.pairs
    sent = send_all(model, plan.model_id, requests, store, concurrency=concurrency, progress=progress)
    points = plan.points if mode == "pointwise" else []
    pairs = plan.pairs if mode == "pairwise" else []
    scores = score(plan.model_id, points, pairs, store.replies)
    write_text_atomic(out.report, report_markdown(scores, inputs))
    written += [out.replies, out.report]
    return ReplayOutcome(sent, scores, tuple(written))
