"""The labelled sibling pairs as a preference corpus: one JSON line per pair (replay --export FILE).

Reads the pairwise requests (their journals' nodes and the rebuilt contexts); writes the JSONL file
atomically. The schema is `PreferencePair` below (docs/grading-and-audit.md, "Replay").
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from mle_world import agent
from mle_world.records import Record, Stage
from mle_world.replay.requests import PairRequest
from mle_world.storage import write_text_atomic

CORPUS_VERSION = 1


class CorpusCandidate(Record):
    """One solution of a pair, as its trial's journal holds it, and what its run gave."""

    node_id: str
    stage: Stage
    plan: str
    code: str
    buggy: bool
    """The run counted as buggy (agent/prompts.py's BUGGY_RULE)."""
    metric: float | None
    """The validation metric the reviewer reported (None when buggy)."""


class CorpusContext(Record):
    """What both candidates were written against: the task and the shared parent at the earlier one's step."""

    task_description: str
    data_preview: str | None
    """The trial's Data Overview (None when its configuration shows none, or in blind context)."""
    blind: bool
    """The trial's world model saw only the task and the candidates (`wm-blind`)."""
    parent: CorpusCandidate | None
    """The shared parent (None for two drafts)."""
    parent_output_tail: str | None
    best_metric: float | None
    """The best validation metric before the earlier candidate's step."""
    lower_is_better: bool | None


class ChatMessage(Record):
    role: str
    content: str


class PreferencePair(Record):
    """One line of the preference corpus."""

    corpus_version: int = CORPUS_VERSION
    task: str
    """The MLE-bench competition id."""
    trial_id: str
    configuration: str
    seed: int
    context: CorpusContext
    a: CorpusCandidate
    b: CorpusCandidate
    better: Literal["A", "B"]
    """Which candidate improved more: a good run beats a buggy one, then the better metric in the task's
    direction (`lower_is_better`); ties and two buggy runs are not in the corpus."""
    messages: tuple[ChatMessage, ...]
    """The pairwise prompt the harness's world model gets for this pair (OpenAI chat messages)."""


def _candidate(node: agent.Node) -> CorpusCandidate:
    return CorpusCandidate(
        node_id=node.id,
        stage=node.stage,
        plan=node.plan,
        code=node.code,
        buggy=node.is_buggy,
        metric=node.metric,
    )


def preference_pair(request: PairRequest) -> PreferencePair:
    ctx = request.context
    spec = request.trial.spec
    parent = ctx.reference
    return PreferencePair(
        task=spec.task,
        trial_id=spec.trial_id,
        configuration=spec.configuration,
        seed=spec.seed,
        context=CorpusContext(
            task_description=ctx.task,
            data_preview=None if ctx.blind else ctx.data_preview,
            blind=ctx.blind,
            parent=_candidate(parent) if parent is not None and not ctx.blind else None,
            parent_output_tail=parent.term_out[-1500:] if parent is not None and not ctx.blind else None,
            best_metric=None if ctx.blind else ctx.best_metric,
            lower_is_better=request.trial.checkpoint.lower_is_better,
        ),
        a=_candidate(request.a),
        b=_candidate(request.b),
        better=request.better,
        messages=tuple(ChatMessage(role=m["role"], content=m["content"]) for m in request.messages),
    )


def write_corpus(path: Path, pairs: Sequence[PairRequest]) -> int:
    """The corpus at `path` (replaced atomically); returns its line count."""
    lines = [preference_pair(p).model_dump_json() for p in pairs]
    write_text_atomic(path, "".join(line + "\n" for line in lines))
    return len(lines)
