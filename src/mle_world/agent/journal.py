"""The journal of solution nodes (AIDE's single state object) and its checkpoint file.

Reads and writes `journal.json` in the trial directory (atomically, after every step).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mle_world.records import Stage
from mle_world.storage import read_model, write_model

JOURNAL_VERSION = 1
GateLabel = Literal["execute", "skip", "forced", "not_gated"]


class WorldInfo(BaseModel):
    """What the world model said about one candidate, kept on its node."""

    model_config = ConfigDict(extra="ignore")

    mode: Literal["pointwise", "pairwise"]
    valid: bool
    p_bug: float | None = None
    p_improves: float | None = None
    predicted_metric: float | None = None
    confidence: float | None = None
    rationale: str | None = None
    error: str | None = None
    rank: int | None = None
    comparisons: list[dict[str, Any]] = Field(default_factory=list)
    """Pairwise: each match as {"a": node_id, "b": node_id, "better": "A"|"B"|None, "confidence": x}."""


class Node(BaseModel):
    """One candidate solution. Mirrors AIDE's Node plus the world-model fields.

    `metric` is None for buggy and skipped nodes (AIDE's WorstMetricValue). Children are derived
    from `parent_id` rather than stored, so the checkpoint has a single source of truth.
    """

    model_config = ConfigDict(extra="ignore", validate_assignment=False)

    id: str
    step: int
    stage: Stage
    parent_id: str | None = None
    group: int = 0
    """Index of the loop iteration that produced this node (k candidates share a group)."""
    candidate: int = 0
    plan: str = ""
    code: str = ""
    ctime: float = 0.0
    term_out: str = ""
    """Tail-truncated output of the run shown to the reviewer and the debug prompt."""
    exec_time: float | None = None
    exit_code: int | None = None
    timed_out: bool = False
    exc_type: str | None = None
    exc_info: str | None = None
    debug_run_ok: bool | None = None
    analysis: str = ""
    metric: float | None = None
    lower_is_better: bool | None = None
    is_buggy: bool = False
    has_submission: bool = False
    debug_depth: int = 0
    executed: bool = False
    skipped: bool = False
    gate: GateLabel | None = None
    prediction: WorldInfo | None = None


class Checkpoint(BaseModel):
    """journal.json: the nodes plus everything needed to resume the loop where it stopped."""

    model_config = ConfigDict(extra="ignore")

    version: int = JOURNAL_VERSION
    trial_id: str
    science_hash: str
    time_used_s: float = 0.0
    exec_time_s: float = 0.0
    llm_time_s: float = 0.0
    downtime_s: float = 0.0
    """Endpoint downtime of all sessions, excluded from time_used_s."""
    sessions: int = 0
    consecutive_skips: int = 0
    groups: int = 0
    lower_is_better: bool | None = None
    best_node_id: str | None = None
    rng_state: list[Any] | None = None
    nodes: list[Node] = Field(default_factory=list)


class Journal:
    """The nodes of one trial with AIDE's derived views (drafts, buggy, good, best, memory)."""

    def __init__(self, nodes: list[Node] | None = None, lower_is_better: bool | None = None) -> None:
        self.nodes: list[Node] = list(nodes or [])
        self.lower_is_better = lower_is_better
        self._by_id = {n.id: n for n in self.nodes}

    def __len__(self) -> int:
        return len(self.nodes)

    def append(self, node: Node) -> None:
        node.step = len(self.nodes)
        self.nodes.append(node)
        self._by_id[node.id] = node

    def get(self, node_id: str | None) -> Node | None:
        return None if node_id is None else self._by_id.get(node_id)

    def children(self, node: Node) -> list[Node]:
        return [n for n in self.nodes if n.parent_id == node.id]

    def is_leaf(self, node: Node) -> bool:
        """A node with no executed children; skipped candidates never executed, so they don't count."""
        return not any(c.executed for c in self.children(node))

    @property
    def executed_nodes(self) -> list[Node]:
        return [n for n in self.nodes if n.executed]

    @property
    def skipped_nodes(self) -> list[Node]:
        return [n for n in self.nodes if n.skipped]

    @property
    def draft_nodes(self) -> list[Node]:
        return [n for n in self.executed_nodes if n.parent_id is None]

    @property
    def buggy_nodes(self) -> list[Node]:
        return [n for n in self.executed_nodes if n.is_buggy]

    @property
    def good_nodes(self) -> list[Node]:
        return [n for n in self.executed_nodes if not n.is_buggy]

    def better(self, a: float, b: float) -> bool:
        """True when metric `a` is strictly better than `b` in the journal's direction."""
        return a < b if self.lower_is_better else a > b

    def best_node(self, before_step: int | None = None) -> Node | None:
        """The best good node by reported validation metric (AIDE's greedy choice).

        Direction is fixed by the first good node; a reviewer flipping `lower_is_better` later
        would crash AIDE on an assertion, so here the journal's direction simply wins.
        """
        best: Node | None = None
        for node in self.good_nodes:
            if before_step is not None and node.step >= before_step:
                continue
            if node.metric is None:
                continue
            if best is None or best.metric is None or self.better(node.metric, best.metric):
                best = node
        return best

    def top_nodes(self, k: int) -> list[Node]:
        good = [n for n in self.good_nodes if n.metric is not None]
        sign = 1.0 if self.lower_is_better else -1.0
        good.sort(key=lambda n: sign * (n.metric or 0.0))
        return good[:k]

    def memory(self) -> str:
        """AIDE's Memory section: design, results and metric of every good node."""
        parts = []
        for node in self.good_nodes:
            parts.append(f"Design: {node.plan}\nResults: {node.analysis}\nValidation Metric: {node.metric}")
        return "\n-------------------------------\n".join(parts)


def valid_metric(value: object) -> float | None:
    """A finite float from a review, else None. Integers count (AIDE drops them: a known bug)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    result = float(value)
    return result if math.isfinite(result) else None


def save_checkpoint(path: Path, checkpoint: Checkpoint) -> None:
    write_model(path, checkpoint)


def load_checkpoint(path: Path) -> Checkpoint | None:
    if not path.exists():
        return None
    return read_model(path, Checkpoint)
