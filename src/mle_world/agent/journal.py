"""The journal of solution nodes (AIDE's single state object) and its checkpoint files.

Reads and writes `journal.json` (a compacted snapshot, replaced atomically) and `journal.jsonl` (one
appended line per checkpoint since that snapshot) in the trial directory.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mle_world.records import GateLabel, Prediction, Stage, improves
from mle_world.storage import Unreadable, load_record, read_text, write_model

JOURNAL_VERSION = 2
"""2: journal.json may be followed by journal.jsonl; read both with `load_checkpoint`."""
COMPACT_MIN_BYTES = 256 * 1024
MEMORY_SEPARATOR = "\n-------------------------------\n"


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
    reviewer_metric: float | None = None
    """The metric the reviewer reported (AIDE's only source)."""
    printed_metric: float | None = None
    """The last `Validation metric: <value>` line the script printed."""
    metric_mismatch: bool = False
    """Reviewer and printed metric disagree beyond rounding (or the reviewer gave none)."""
    lower_is_better: bool | None = None
    """The reviewer's direction for this node (one vote when the task's direction is unknown)."""
    is_buggy: bool = False
    has_submission: bool = False
    submission_sha256: str | None = None
    """sha256 of the run's submission.csv as the agent staged it (None without one)."""
    debug_depth: int = 0
    executed: bool = False
    skipped: bool = False
    gate: GateLabel | None = None
    prediction: Prediction | None = None
    context_overflow: bool = False
    """The coder or reviewer prompt did not fit the context window even shrunk (node counted buggy)."""
    budget_time_s: float | None = None
    """Trial budget time used when the node was recorded (the audit's time axis; survives resumes)."""


class Checkpoint(BaseModel):
    """journal.json: the nodes plus everything needed to resume the loop where it stopped.

    A line of journal.jsonl is a Checkpoint too, holding only the nodes appended since the line
    before it (`first_node` is the index of its first node) and the state at that moment.
    """

    model_config = ConfigDict(extra="ignore")

    version: int = JOURNAL_VERSION
    seq: int = 0
    """How many checkpoints this state includes; a log line at or below a snapshot's seq is stale."""
    first_node: int = 0
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
    direction_source: Literal["task", "reviews"] | None = None
    best_node_id: str | None = None
    rng_state: list[Any] | None = None
    execution_started_s: float | None = None
    """Budget time when the execution in flight started (None between executions)."""
    execution_timeout_s: float | None = None
    execution_started_wall: float | None = None
    """Epoch seconds of that start: a killed session is charged min(timeout, wall time since)."""
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

    def improves(self, metric: float | None, reference: float | None) -> bool:
        """`records.improves` in the journal's direction: `metric` strictly beats `reference`."""
        return improves(metric, reference, self.lower_is_better)

    def best_node(self, before_step: int | None = None) -> Node | None:
        """The best good node by reported validation metric (AIDE's greedy choice).

        Direction is fixed by the first good node; a reviewer flipping `lower_is_better` later
        would crash AIDE on an assertion, so here the journal's direction simply wins.
        """
        best: Node | None = None
        for node in self.good_nodes:
            if before_step is not None and node.step >= before_step:
                continue
            if self.improves(node.metric, best.metric if best else None):
                best = node
        return best

    def top_nodes(self, k: int) -> list[Node]:
        good = [n for n in self.good_nodes if n.metric is not None]
        sign = 1.0 if self.lower_is_better else -1.0
        good.sort(key=lambda n: sign * (n.metric or 0.0))
        return good[:k]

    def memory(self, max_chars: int | None = None) -> str:
        """AIDE's Memory section: design, results and metric of every good node.

        With `max_chars` it keeps, within that many characters, the best nodes (up to 3) and then
        the most recent ones, listed in journal order, and says how many were left out.
        """
        good = self.good_nodes
        entries = {
            n.id: f"Design: {n.plan}\nResults: {n.analysis}\nValidation Metric: {n.metric}" for n in good
        }
        if max_chars is None:
            return MEMORY_SEPARATOR.join(entries[n.id] for n in good)
        chosen: set[str] = set()
        used = 0
        for node in [*self.top_nodes(3), *reversed(good)]:
            if node.id in chosen:
                continue
            cost = len(entries[node.id]) + len(MEMORY_SEPARATOR)
            if used + cost > max_chars:
                continue
            chosen.add(node.id)
            used += cost
        parts = [entries[n.id] for n in good if n.id in chosen]
        omitted = len(good) - len(chosen)
        if omitted and used + 120 <= max_chars:
            parts.insert(0, f"({omitted} earlier solution(s) omitted to fit the context window.)")
        return MEMORY_SEPARATOR.join(parts)


def valid_metric(value: object) -> float | None:
    """A finite float from a review, else None. Integers count (AIDE drops them: a known bug)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    result = float(value)
    return result if math.isfinite(result) else None


def log_path(snapshot: Path) -> Path:
    """journal.jsonl beside journal.json."""
    return snapshot.with_suffix(".jsonl")


class JournalWriter:
    """Checkpoints one trial's journal in time independent of its length.

    Each checkpoint appends one line (the new nodes and the state) to journal.jsonl, written with a
    single `write` and fsynced, and cut back if anything interrupts it. When the log outgrows the
    snapshot (and COMPACT_MIN_BYTES), or on `compact=True`, journal.json is rewritten atomically
    and the log removed, so rewriting costs a bounded multiple of what was appended. A kill at any
    point leaves a snapshot plus whole lines (at most a torn last one, which readers drop). Nodes
    are immutable once checkpointed: a later change to one reaches disk only at the next compaction.
    """

    def __init__(self, snapshot: Path, loaded: Checkpoint | None) -> None:
        self.snapshot = snapshot
        self.log = log_path(snapshot)
        self.seq = loaded.seq if loaded else 0
        self._on_disk = len(loaded.nodes) if loaded else 0
        self._snapshot_bytes = snapshot.stat().st_size if snapshot.exists() else 0
        self._log_bytes = self.log.stat().st_size if self.log.exists() else 0
        # A resumed journal starts from a fresh snapshot, so no torn line stays in the middle of a log.
        self._compact_next = self._log_bytes > 0 or (loaded is not None and loaded.version != JOURNAL_VERSION)

    def save(self, checkpoint: Checkpoint, *, compact: bool = False, sync: bool = True) -> None:
        """Append the state (or compact). `sync=False` skips the fsync of an appended line: a killed
        process still leaves it on disk (page cache); only a machine crash can lose it (and what was
        appended after it), never the consistency of what is read back."""
        self.seq += 1
        nodes = checkpoint.nodes
        if compact or self._compact_next or self._log_bytes > max(COMPACT_MIN_BYTES, self._snapshot_bytes):
            self._compact(
                checkpoint.model_copy(update={"seq": self.seq, "first_node": 0, "version": JOURNAL_VERSION})
            )
        else:
            line = checkpoint.model_copy(
                update={"seq": self.seq, "first_node": self._on_disk, "nodes": nodes[self._on_disk :]}
            )
            self._append((line.model_dump_json() + "\n").encode(), sync=sync)
        self._on_disk = len(nodes)

    def _compact(self, checkpoint: Checkpoint) -> None:
        write_model(self.snapshot, checkpoint)
        self._snapshot_bytes = self.snapshot.stat().st_size
        # A crash before this unlink leaves only lines at or below the snapshot's seq: skipped on read.
        self.log.unlink(missing_ok=True)
        self._log_bytes = 0
        self._compact_next = False

    def _append(self, data: bytes, *, sync: bool = True) -> None:
        fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            try:
                written = 0
                while written < len(data):
                    written += os.write(fd, data[written:])
                if sync:
                    os.fsync(fd)
            except BaseException:
                os.ftruncate(fd, size)  # interrupted (e.g. by a preemption signal): no torn line
                raise
        finally:
            os.close(fd)
        self._log_bytes = size + len(data)


def save_checkpoint(path: Path, checkpoint: Checkpoint) -> None:
    """Write a whole journal.json (no log beside it), e.g. a journal built outside the agent."""
    JournalWriter(path, None).save(checkpoint, compact=True)


class CorruptJournal(Exception):
    """journal.json cannot be read back: the trial cannot resume, and the message names the file."""


def newer_than(checkpoint: Checkpoint | None, path: Path) -> None:
    """CorruptJournal for a journal of a newer format: its unknown fields would be dropped (extra is
    ignored) and the resumed journal rewritten without them."""
    if checkpoint is not None and checkpoint.version > JOURNAL_VERSION:
        raise CorruptJournal(
            f"{path}: journal version {checkpoint.version} is newer than this agent's ({JOURNAL_VERSION}): "
            "written by a newer harness; resume it with that harness (or its image)"
        )


def load_checkpoint(path: Path) -> Checkpoint | None:
    """The journal as of its last complete checkpoint: journal.json plus the whole lines of journal.jsonl.

    Raises CorruptJournal for an unreadable snapshot; a torn or inconsistent log line
    ends the replay there (what follows it cannot have been written by a live writer).
    """
    log = log_path(path)
    got = load_record(path, Checkpoint)
    merged = None if isinstance(got, Unreadable) and got.missing else got
    if isinstance(merged, Unreadable):
        exc = merged.error
        if not isinstance(exc, ValidationError):
            raise CorruptJournal(f"{path}: unreadable journal ({exc})")
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise CorruptJournal(
            f"{path}: corrupt journal ({where + ': ' if where else ''}{err['msg']}); move it aside to "
            "restart this trial from scratch"
        )
    newer_than(merged, path)
    if not log.exists():
        return merged
    with open(log, "rb") as handle:
        for raw in handle:
            if not raw.endswith(b"\n"):
                break
            try:
                line = Checkpoint.model_validate_json(raw)
            except ValidationError:
                break
            newer_than(line, log)
            if merged is not None and line.seq <= merged.seq:
                continue
            have = len(merged.nodes) if merged is not None else 0
            if line.first_node != have or (merged is not None and merged.trial_id != line.trial_id):
                break
            nodes = (merged.nodes if merged is not None else []) + line.nodes
            merged = line.model_copy(update={"nodes": nodes, "first_node": 0})
    return merged


def load_journal_data(path: Path) -> dict[str, Any]:
    """journal.json plus journal.jsonl as plain JSON (for tolerant readers: the audit, trial pages).

    Raises OSError when neither file exists and ValueError when the snapshot is not JSON; log lines
    are merged as `load_checkpoint` does, without validating nodes.
    """
    log = log_path(path)
    data: dict[str, Any] = json.loads(read_text(path)) if path.exists() or not log.exists() else {}
    if not isinstance(data, dict) or not log.exists():
        return data
    nodes = list(data.get("nodes") or [])
    seq = data.get("seq", 0)
    with open(log, "rb") as handle:
        for raw in handle:
            try:
                line = json.loads(raw) if raw.endswith(b"\n") else None
            except ValueError:
                line = None
            if not isinstance(line, dict):
                break
            if isinstance(seq, int) and isinstance(line.get("seq"), int) and line["seq"] <= seq:
                continue
            if line.get("first_node") != len(nodes) or not isinstance(line.get("nodes"), list):
                break
            nodes += line["nodes"]
            seq = line.get("seq")
            data = {**line, "nodes": nodes, "first_node": 0}
    data["nodes"] = nodes
    return data
