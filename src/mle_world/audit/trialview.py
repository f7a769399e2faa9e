"""One trial as a page model: the search tree laid out, each node's details, the best path, the budget timeline.

Reads a trial dir's journal.json, events.jsonl, status.json, result.json and grading report (or the
parsed journal and events the audit already holds); writes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mle_world.agent import Node, load_journal_data
from mle_world.audit.attempts import superseded_by_rerun
from mle_world.audit.launches import trial_launch_fact
from mle_world.audit.nodetext import code_diff, diff_class, output_tail
from mle_world.audit.timeline import Timeline, budget_timeline
from mle_world.layout import TrialFiles
from mle_world.records import Prediction, PredictionEvent, improves
from mle_world.storage import read_text
from mle_world.trial_events import TrialEvents, read_events

X_STEP = 26.0
Y_STEP = 56.0
MARGIN = 22.0
RENDERED_FIELDS = frozenset(
    {
        "id", "step", "stage", "parent_id", "plan", "code", "term_out", "analysis", "metric",
        "is_buggy", "executed", "skipped", "exec_time", "exit_code", "timed_out", "exc_type",
        "exc_info", "gate", "prediction", "ctime", "group", "candidate", "debug_depth",
        "lower_is_better", "has_submission", "debug_run_ok", "budget_time_s", "metric_mismatch",
    }
)  # fmt: skip
"""Node fields with their own place on the page; any other field is listed under "more fields"."""


@dataclass(frozen=True)
class Observed:
    """What happened to a node, to set beside the world model's prediction."""

    executed: bool
    buggy: bool | None
    metric: float | None
    improved: bool | None
    """Good and better than the best node before it (from the prediction event when recorded)."""


@dataclass(frozen=True)
class NodeView:
    """One journal node as the page shows it."""

    node: Node
    status: str
    """good, buggy, skipped or pending (generated but neither run nor skipped)."""
    x: float
    y: float
    on_best_path: bool
    is_best: bool
    diff: str
    """Unified diff of the code against the parent's code ('' for drafts)."""
    output_tail: str
    observed: Observed
    offset_s: float | None
    """When the node was recorded: trial budget time when journals carry it, else seconds since the
    first node was generated (wall clock)."""
    metric_mismatch: str
    """'' or what the script printed against what the reviewer reported, when they disagree."""
    extra: tuple[tuple[str, str], ...]
    """Fields the page has no special place for (newer journal versions), as text."""

    @property
    def short(self) -> str:
        return self.node.id[:8]

    @property
    def diff_lines(self) -> list[tuple[str, str]]:
        """The diff's lines, each with its class on the page: a hunk header, an added or a removed line."""
        return [(diff_class(line), line) for line in self.diff.splitlines()]

    @property
    def prediction(self) -> Prediction | None:
        return self.node.prediction

    @property
    def rejected(self) -> bool | None:
        """The world model's verdict alone would veto the candidate (journals that record it)."""
        return self.node.prediction.rejected if self.node.prediction else None

    @property
    def counterfactual_gate(self) -> str | None:
        """Ungated runs: what the gated regime would have decided (journals that record it)."""
        return self.node.prediction.counterfactual_gate if self.node.prediction else None

    @property
    def label(self) -> str:
        """Tooltip text of the node in the tree."""
        metric = "" if self.node.metric is None else f", metric {self.node.metric:.4g}"
        return f"step {self.node.step} {self.node.stage}: {self.status}{metric}"


@dataclass(frozen=True)
class Edge:
    x1: float
    y1: float
    x2: float
    y2: float
    on_best_path: bool
    skipped: bool


@dataclass
class TrialView:
    """Everything a trial page shows."""

    trial_dir: Path
    trial_id: str
    facts: list[tuple[str, str]] = field(default_factory=list)
    """Header key/values: state, cause, stop reason, counts, score, medal."""
    nodes: list[NodeView] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    width: float = 0.0
    height: float = 0.0
    timeline: Timeline | None = None
    problems: list[str] = field(default_factory=list)
    """Files that were missing or unreadable (the page still renders what it could read)."""
    lower_is_better: bool | None = None
    time_axis: str = "since first node"
    """What a node's time means: "budget time" (journals that record it) or "since first node"."""

    @property
    def counts(self) -> dict[str, int]:
        """Nodes per status and per stage (shown in the header and checked by tests)."""
        out: dict[str, int] = {"nodes": len(self.nodes)}
        for view in self.nodes:
            out[view.status] = out.get(view.status, 0) + 1
            out[view.node.stage] = out.get(view.node.stage, 0) + 1
        return out


def read_json(path: Path) -> tuple[Any, str | None]:
    """(data, None), or (None, why) for a missing or unreadable file."""
    try:
        return json.loads(read_text(path)), None
    except FileNotFoundError:
        return None, f"{path.name}: missing"
    except (OSError, ValueError) as exc:
        return None, f"{path.name}: unreadable ({type(exc).__name__})"


def read_journal(path: Path) -> tuple[Any, str | None]:
    """Like `read_json`, for journal.json plus the lines appended to journal.jsonl since."""
    try:
        return load_journal_data(path), None
    except FileNotFoundError:
        return None, f"{path.name}: missing"
    except (OSError, ValueError) as exc:
        return None, f"{path.name}: unreadable ({type(exc).__name__})"


def node_status(node: Node, gate: object = None) -> str:
    """good, buggy, skipped (vetoed by the gate), not_selected (another candidate won) or pending."""
    if node.executed:
        return "buggy" if node.is_buggy else "good"
    if gate == "not_selected":
        return "not_selected"
    return "skipped" if node.skipped else "pending"


def best_node_id(nodes: Sequence[Node], lower: bool | None) -> str | None:
    """The best good executed node by metric, as the agent chooses it."""
    best: Node | None = None
    for node in nodes:
        if (
            node.executed
            and not node.is_buggy
            and improves(node.metric, best.metric if best else None, lower)
        ):
            best = node
    return best.id if best else None


def layout(nodes: Sequence[Node]) -> dict[str, tuple[float, float]]:
    """Tidy tree coordinates: leaves take consecutive columns, a parent sits over its children."""
    by_id = {n.id: n for n in nodes}
    children: dict[str | None, list[Node]] = {}
    for node in nodes:
        parent = node.parent_id if node.parent_id in by_id else None
        children.setdefault(parent, []).append(node)
    coords: dict[str, tuple[float, float]] = {}
    next_column = 0

    # Iterative post-order: journals can be deep (long debug chains) and recursion would overflow.
    for root in children.get(None, []):
        stack: list[tuple[Node, int, bool]] = [(root, 0, False)]
        while stack:
            node, depth, expanded = stack.pop()
            kids = children.get(node.id, [])
            if not kids:
                coords[node.id] = (MARGIN + next_column * X_STEP, MARGIN + depth * Y_STEP)
                next_column += 1
            elif not expanded:
                stack.append((node, depth, True))
                stack.extend((kid, depth + 1, False) for kid in reversed(kids))
            else:
                xs = [coords[k.id][0] for k in kids]
                coords[node.id] = ((min(xs) + max(xs)) / 2, MARGIN + depth * Y_STEP)
    return coords


def _observed(node: Node, event: PredictionEvent | None) -> Observed:
    improved = event.actual_improved if event is not None else None
    return Observed(
        executed=node.executed,
        buggy=node.is_buggy if node.executed else None,
        metric=node.metric if node.executed else None,
        improved=improved,
    )


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, default=str)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "" if value is None else str(value)


def load_trial_view(
    trial_dir: Path,
    *,
    trial_id: str | None = None,
    journal: Any = None,
    events: TrialEvents | None = None,
    report: Mapping[str, Any] | None = None,
) -> TrialView:
    """Read (or take) a trial's records and build its page model; never raises for bad files.

    The audit passes the journal and events it has already parsed so no file is read twice.
    """
    view = TrialView(trial_dir=trial_dir, trial_id=trial_id or trial_dir.name)
    files = TrialFiles(trial_dir)
    if journal is None:
        journal, problem = read_journal(files.journal)
        if problem:
            view.problems.append(problem)
    if events is None:
        events = read_events(files.events)
    if events.missing:
        view.problems.append("events.jsonl: missing")
    elif events.bad_lines:
        view.problems.append(f"events.jsonl: {events.bad_lines} unreadable lines")
    status, _ = read_json(files.status)
    result, _ = read_json(files.result)
    spec, _ = read_json(files.spec)
    if report is None:
        report, _ = read_json(files.report)
    if isinstance(report, Mapping) and isinstance(status, Mapping) and isinstance(status.get("state"), str):
        superseded = superseded_by_rerun(
            report.get("attempt"), status["state"], status.get("attempt"), status.get("cause")
        )
        if superseded is not None:  # an earlier attempt's score is not this trial's result
            view.problems.append(f"grading report: {superseded}")
            report = None
    for source in (spec, status, result, journal, report):
        if isinstance(source, dict) and isinstance(source.get("trial_id"), str):
            view.trial_id = trial_id or source["trial_id"]
            break
    _facts(view, spec, status, result, report)
    launched = (
        trial_launch_fact(trial_dir, status.get("launches") or ()) if isinstance(status, dict) else None
    )
    if launched:
        view.facts.append(("launch", launched))

    raw_nodes = journal.get("nodes") if isinstance(journal, dict) else None
    nodes: list[Node] = []
    raws: list[dict[str, Any]] = []
    for index, raw in enumerate(raw_nodes if isinstance(raw_nodes, list) else []):
        try:
            nodes.append(Node.model_validate(raw))
            raws.append(raw)
        except ValidationError:
            view.problems.append(f"journal.json: node {index} unreadable")
    lower = journal.get("lower_is_better") if isinstance(journal, dict) else None
    view.lower_is_better = lower if isinstance(lower, bool) else None
    by_id = {n.id: n for n in nodes}
    best_id = best_node_id(nodes, view.lower_is_better)
    best_path: set[str] = set()
    cursor = by_id.get(best_id) if best_id else None
    while cursor is not None and cursor.id not in best_path:
        best_path.add(cursor.id)
        cursor = by_id.get(cursor.parent_id) if cursor.parent_id else None
    predictions = {p.node_id: p for p in events.predictions}
    coords = layout(nodes)
    origin = min((n.ctime for n in nodes if n.ctime > 0), default=0.0)
    budget_clock = any(isinstance(raw.get("budget_time_s"), int | float) for raw in raws)
    view.time_axis = "budget time" if budget_clock else "since first node"
    for node, raw in zip(nodes, raws, strict=True):
        x, y = coords[node.id]
        parent = by_id.get(node.parent_id) if node.parent_id else None
        if budget_clock:
            offset = raw.get("budget_time_s") if isinstance(raw.get("budget_time_s"), int | float) else None
        else:
            offset = node.ctime - origin if origin and node.ctime > 0 else None
        extra = tuple(
            (k, _text(v))
            for k, v in raw.items()
            if k not in RENDERED_FIELDS and v is not False and v not in (None, "", [], {})
        )
        mismatch = ""
        if raw.get("metric_mismatch"):
            printed, reviewed = raw.get("printed_metric"), raw.get("reviewer_metric")
            mismatch = f"script printed {_fmt(printed) or '–'}, reviewer said {_fmt(reviewed) or '–'}"
        view.nodes.append(
            NodeView(
                node=node,
                status=node_status(node, raw.get("gate")),
                x=x,
                y=y,
                on_best_path=node.id in best_path,
                is_best=node.id == best_id,
                diff=code_diff(parent, node),
                output_tail=output_tail(node.term_out),
                observed=_observed(node, predictions.get(node.id)),
                offset_s=offset,
                metric_mismatch=mismatch,
                extra=extra,
            )
        )
        if parent is not None:
            px, py = coords[parent.id]
            view.edges.append(
                Edge(px, py, x, y, node.id in best_path and parent.id in best_path, not node.executed)
            )
    view.width = max((x for x, _ in coords.values()), default=0.0) + MARGIN
    view.height = max((y for _, y in coords.values()), default=0.0) + MARGIN
    view.timeline = budget_timeline(events, result if isinstance(result, dict) else None)
    return view


def _facts(view: TrialView, spec: Any, status: Any, result: Any, report: Mapping[str, Any] | None) -> None:
    def add(label: str, source: Any, key: str) -> None:
        if isinstance(source, Mapping) and source.get(key) not in (None, ""):
            view.facts.append((label, _fmt(source[key])))

    for label, key in (
        ("regime", "regime"),
        ("configuration", "configuration"),
        ("task", "task"),
        ("seed", "seed"),
    ):
        add(label, spec, key)
    for label, key in (
        ("state", "state"),
        ("failure class", "failure_class"),
        ("cause", "cause"),
        ("attempt", "attempt"),
        ("slurm job", "slurm_job_id"),
    ):
        add(label, status, key)
    for label, key in (
        ("stop reason", "stop_reason"), ("best metric", "best_metric"), ("steps", "steps"),
        ("executed", "executed"), ("skipped", "skipped"), ("buggy", "buggy"), ("time used (s)", "time_used_s"),
        ("resumed", "resumed"),
    ):  # fmt: skip
        add(label, result, key)
    for label, key in (
        ("score", "score"),
        ("valid submission", "valid_submission"),
        ("any medal", "any_medal"),
    ):
        add(label, report, key)
    if isinstance(report, Mapping):
        medal = next((m for m in ("gold", "silver", "bronze") if report.get(f"{m}_medal")), None)
        if medal:
            view.facts.append(("medal", medal))
