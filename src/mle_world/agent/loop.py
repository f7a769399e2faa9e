"""The AIDE loop with the world-model gate, the time budget and checkpoint/resume.

Reads spec settings, the journal checkpoint and the data dir; writes journal.json, events, the best
submission and code (atomically, whenever the best improves), node logs and result.json.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from mle_world.agent import gate
from mle_world.agent.budget import Budget, Clock
from mle_world.agent.downtime import Downtime
from mle_world.agent.events import EventSink
from mle_world.agent.interpreter import CodeRunner, ExecResult
from mle_world.agent.journal import Checkpoint, Journal, JournalWriter, Node, WorldInfo, load_checkpoint
from mle_world.agent.llm import ChatModel, EndpointFailure
from mle_world.agent.policy import select_parent, stage_of
from mle_world.agent.preview import data_preview, task_description
from mle_world.agent.prompts import (
    PromptContext,
    WorldContext,
    debug_messages,
    draft_messages,
    extract_plan_and_code,
    improve_messages,
)
from mle_world.agent.review import Reviewer
from mle_world.agent.workspace import TrialLayout, copy_atomic, prepare, reset_run_submission
from mle_world.agent.world import Comparison, Prediction, WorldModel
from mle_world.records import AgentResult, ExecutionEvent, PredictionEvent, Stage, TrialSpec
from mle_world.storage import write_model, write_text_atomic

log = logging.getLogger(__name__)
T = TypeVar("T")
R = TypeVar("R")
CODE_TRIES = 3


class Preempted(BaseException):
    """Raised from a SIGTERM/SIGUSR2 (exit 143) or SIGINT (exit 130) handler: checkpoint, no result.json."""

    def __init__(self, signum: int, exit_code: int = 143) -> None:
        super().__init__(f"signal {signum}")
        self.signum = signum
        self.exit_code = exit_code


class CheckpointMismatch(Exception):
    """journal.json belongs to another trial or science config."""


@dataclass(frozen=True)
class Services:
    """The side-effect seams of one trial (real ones are wired in `__main__`)."""

    coder: ChatModel
    feedback: ChatModel
    world: ChatModel | None
    runner: CodeRunner
    clock: Clock
    events: EventSink
    llm_time: Callable[[], float] = lambda: 0.0
    """Seconds spent in LLM calls this session (for result.json)."""
    gpu: str | None = None
    """CUDA_VISIBLE_DEVICES passed to the scripts, recorded on execution events."""
    downtime: Downtime | None = None
    """Endpoint outages of this session; the budget clock stands still while one lasts."""


def _concurrently(fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """Run `fn` over `items` in threads (HTTP calls), preserving order; one item runs inline."""
    if len(items) <= 1:
        return [fn(item) for item in items]
    pool = ThreadPoolExecutor(max_workers=len(items), thread_name_prefix="llm")
    try:
        futures = [pool.submit(fn, item) for item in items]
        return [future.result() for future in futures]
    finally:
        # Never wait here for calls still in flight: on preemption or failure the trial must stop now.
        pool.shutdown(wait=False, cancel_futures=True)


def _rng_state(rng: random.Random) -> list[Any]:
    version, internal, gauss = rng.getstate()
    return [version, list(internal), gauss]


def _set_rng_state(rng: random.Random, state: list[Any]) -> None:
    rng.setstate((state[0], tuple(state[1]), state[2]))


class Agent:
    """One trial: `run()` steps until the budget or an infra failure stops it and returns the result."""

    def __init__(self, spec: TrialSpec, layout: TrialLayout, services: Services) -> None:
        self.spec = spec
        self.settings = spec.agent
        self.layout = layout
        self.s = services
        self.rng = random.Random(spec.seed)
        self.gate_rng = random.Random(spec.seed + 1_000_003)
        prepare(layout)
        self.task = task_description(layout.data_dir)
        self.preview = data_preview(layout.data_dir) if self.settings.data_preview else None
        loaded = load_checkpoint(layout.journal)
        if loaded is not None:
            if loaded.trial_id != spec.trial_id or loaded.science_hash != spec.science_hash:
                raise CheckpointMismatch(
                    f"{layout.journal} belongs to {loaded.trial_id} ({loaded.science_hash}), "
                    f"not {spec.trial_id} ({spec.science_hash})"
                )
            self.ckpt = loaded
            self.ckpt.sessions += 1
            if loaded.rng_state is not None:
                _set_rng_state(self.rng, loaded.rng_state)
            log.info(
                "resuming %s: %d nodes, %.1f s used", spec.trial_id, len(loaded.nodes), loaded.time_used_s
            )
        else:
            self.ckpt = Checkpoint(trial_id=spec.trial_id, science_hash=spec.science_hash, sessions=1)
        self.journal = Journal(self.ckpt.nodes, self.ckpt.lower_is_better)
        self.journal_writer = JournalWriter(layout.journal, loaded)
        self._downtime_carried = self.ckpt.downtime_s
        downtime = services.downtime
        self.budget = Budget(
            self.settings.budget,
            services.clock,
            carried_s=self.ckpt.time_used_s,
            paused=downtime.paused_s if downtime is not None else lambda: 0.0,
        )
        self._llm_carried = self.ckpt.llm_time_s
        self.reviewer = Reviewer(services.feedback, self.task, obfuscate=self.settings.obfuscate)
        wm = self.settings.world_model
        self.world = WorldModel(services.world, wm.temperature) if wm.enabled and services.world else None

    # ---- the loop ----------------------------------------------------------------------
    def run(self) -> AgentResult:
        status = "completed"
        reason = "stopped"
        try:
            while True:
                stop = self.budget.stop_reason(len(self.journal))
                if stop is not None:
                    reason = stop
                    break
                self.step()
        except EndpointFailure as error:
            log.error("endpoint failure: %s", error)
            status, reason = "failed", f"endpoint_unavailable: {error}"
        except Preempted:
            self.s.runner.terminate()
            self._end_outages("preempted")
            self.checkpoint(compact=True)
            raise
        except Exception as error:
            log.exception("agent error")
            status, reason = "failed", f"error: {type(error).__name__}: {error}"
        finally:
            self.s.runner.terminate()
        self._end_outages(reason)
        self.checkpoint(compact=True)
        result = self.result(status, reason)
        write_model(self.layout.result, result)
        return result

    def step(self) -> None:
        parent = select_parent(self.journal, self.settings.search, self.rng)
        stage = stage_of(parent)
        wm = self.settings.world_model
        consult = self.world is not None and stage in wm.applies_to
        k = wm.candidates if consult else 1
        group = self.ckpt.groups
        log.info("step %d (group %d): %s with %d candidate(s)", len(self.journal), group, stage, k)
        nodes = self.generate(stage, parent, k, group)
        if consult:
            outcome = self.consult(stage, parent, nodes)
        else:
            outcome = gate.GateOutcome(0, (), (0,), False)
        prev_best = self.journal.best_node()
        executed: Node | None = None
        if outcome.chosen is not None:
            executed = nodes[outcome.chosen]
            self.execute(executed, parent, prev_best)
        for i, node in enumerate(nodes):
            if outcome.labels:
                node.gate = outcome.labels[i]
            if node is not executed:
                node.skipped = True
                rank = node.prediction.rank if node.prediction else None
                node.analysis = f"Skipped by the world model (gate {node.gate}, predicted rank {rank})."
        for node in nodes:
            self.journal.append(node)
        if consult:
            for node in nodes:
                self.s.events.emit(self.prediction_event(node, prev_best))
        # Any executed node (also of a stage the gate does not apply to) breaks a run of skips.
        self.ckpt.consecutive_skips = 0 if executed is not None else self.ckpt.consecutive_skips + 1
        self.ckpt.groups = group + 1
        self.checkpoint()

    # ---- generation --------------------------------------------------------------------
    def prompt_context(self, candidate: int, candidates: int, group: int) -> PromptContext:
        view = self.budget.view(len(self.journal), self.settings.stages)
        ensemble: tuple[Node, ...] = ()
        if view.stage is not None and view.stage.ensemble_top_k > 0:
            ensemble = tuple(self.journal.top_nodes(view.stage.ensemble_top_k))
        return PromptContext(
            task=self.task,
            memory=self.journal.memory(),
            budget=view,
            exec_timeout_s=self.budget.exec_timeout(debug=False),
            debug_timeout_s=self.budget.exec_timeout(debug=True),
            data_preview=self.preview,
            obfuscate=self.settings.obfuscate,
            ensemble=ensemble,
            candidate=candidate,
            candidates=candidates,
            rng_seed=self.spec.seed * 100_003 + group,
        )

    def generate(self, stage: Stage, parent: Node | None, k: int, group: int) -> list[Node]:
        def one(index: int) -> Node:
            ctx = self.prompt_context(index, k, group)
            if stage == "draft":
                messages = draft_messages(ctx)
            elif stage == "debug" and parent is not None:
                messages = debug_messages(ctx, parent)
            elif parent is not None:
                messages = improve_messages(ctx, parent)
            else:
                raise ValueError(f"stage {stage} needs a parent")
            plan, code, raw = "", "", ""
            for _ in range(CODE_TRIES):
                reply = self.s.coder.chat(messages, purpose=stage, timeout_s=self._llm_timeout())
                raw = reply.content
                plan, code = extract_plan_and_code(raw)
                if code:
                    break
            if not code:
                # AIDE's fallback: the raw completion fails at run time and becomes a debug target.
                code = raw
            return Node(
                id=uuid.uuid4().hex,
                step=-1,
                stage=stage,
                parent_id=parent.id if parent else None,
                group=group,
                candidate=index,
                plan=plan,
                code=code,
                ctime=time.time(),
                debug_depth=parent.debug_depth + 1 if stage == "debug" and parent else 0,
            )

        return _concurrently(one, list(range(k)))

    def _llm_timeout(self) -> float:
        # The client adds its outage window: a request never outlives the trial by more than that.
        return self.budget.left()

    def _end_outages(self, cause: str) -> None:
        if self.s.downtime is not None:
            self.s.downtime.end(cause)

    # ---- world model -------------------------------------------------------------------
    def world_context(self, parent: Node | None) -> WorldContext:
        best = self.journal.best_node()
        return WorldContext(
            task=self.task,
            blind=self.settings.world_model.context == "blind",
            data_preview=self.preview,
            reference=parent,
            best_metric=best.metric if best else None,
            lower_is_better=self.journal.lower_is_better,
        )

    def consult(self, stage: Stage, parent: Node | None, nodes: list[Node]) -> gate.GateOutcome:
        assert self.world is not None
        world = self.world
        wm = self.settings.world_model
        ctx = self.world_context(parent)
        timeout = self._llm_timeout()
        if wm.selection == "pointwise":
            predictions: list[Prediction] = _concurrently(lambda n: world.predict(ctx, n, timeout), nodes)
            order = gate.rank_pointwise(predictions, self.journal.lower_is_better)
            for rank, i in enumerate(order):
                p = predictions[i]
                nodes[i].prediction = WorldInfo(
                    mode="pointwise",
                    valid=p.valid,
                    p_bug=p.p_bug,
                    p_improves=p.p_improves,
                    predicted_metric=p.predicted_metric,
                    confidence=p.confidence,
                    rationale=p.rationale,
                    error=p.error,
                    rank=rank,
                )
            rejected = gate.rejects(predictions[order[0]], wm)
        else:
            order, rejected = self._pairwise(ctx, nodes, timeout)
        outcome = gate.decide(
            order=order,
            rejected=rejected,
            regime=self.spec.regime,
            consecutive_skips=self.ckpt.consecutive_skips,
            settings=wm,
            rng=self.gate_rng,
        )
        log.info("gate: labels=%s chosen=%s rejected=%s", outcome.labels, outcome.chosen, rejected)
        return outcome

    def _pairwise(self, ctx: WorldContext, nodes: list[Node], timeout: float) -> tuple[list[int], bool]:
        assert self.world is not None
        world = self.world
        wm = self.settings.world_model

        def compare_round(pairs: list[tuple[int, int]]) -> list[Comparison]:
            return _concurrently(lambda p: world.compare(ctx, nodes[p[0]], nodes[p[1]], timeout), pairs)

        result = gate.tournament(len(nodes), compare_round, wm.pairwise_confidence)
        comparisons: dict[int, list[dict[str, Any]]] = {i: [] for i in range(len(nodes))}
        for match in result.matches:
            entry = {
                "a": nodes[match.a].id,
                "b": nodes[match.b].id,
                "better": match.comparison.better,
                "confidence": match.comparison.confidence,
                "valid": match.comparison.valid,
                "counted": match.counted,
            }
            comparisons[match.a].append(entry)
            comparisons[match.b].append(entry)
        best = self.journal.best_node()
        vs_best: Comparison | None = None
        if best is not None:
            vs_best = world.compare(ctx, best, nodes[result.winner], timeout)
            comparisons[result.winner].append(
                {
                    "a": best.id,
                    "b": nodes[result.winner].id,
                    "better": vs_best.better,
                    "confidence": vs_best.confidence,
                    "valid": vs_best.valid,
                    "counted": gate.counts(vs_best, wm.pairwise_confidence),
                }
            )
        order = sorted(range(len(nodes)), key=lambda i: (result.ranks[i], i))
        for i, node in enumerate(nodes):
            mine = comparisons[i]
            p_improves = None
            confidence = mine[-1]["confidence"] if mine else None
            if (
                i == result.winner
                and vs_best is not None
                and vs_best.valid
                and vs_best.confidence is not None
            ):
                # The winner's chance to beat the best, read off the comparison with it.
                p_improves = vs_best.confidence if vs_best.better == "B" else 1.0 - vs_best.confidence
                confidence = vs_best.confidence
            node.prediction = WorldInfo(
                mode="pairwise",
                valid=all(c["valid"] for c in mine),
                p_improves=p_improves,
                confidence=confidence,
                rank=result.ranks[i],
                comparisons=mine,
            )
        return order, gate.pairwise_rejects(vs_best, wm)

    def prediction_event(self, node: Node, prev_best: Node | None) -> PredictionEvent:
        info = node.prediction or WorldInfo(mode=self.settings.world_model.selection, valid=False)
        actual_improved = None
        if node.executed:
            actual_improved = not node.is_buggy and (
                prev_best is None
                or prev_best.metric is None
                or (node.metric is not None and self.journal.better(node.metric, prev_best.metric))
            )
        return PredictionEvent(
            ts=datetime.now(UTC),
            node_id=node.id,
            stage=node.stage,
            mode=info.mode,
            valid=info.valid,
            p_bug=info.p_bug,
            p_improves=info.p_improves,
            predicted_metric=info.predicted_metric,
            confidence=info.confidence,
            gate=node.gate or "execute",
            executed=node.executed,
            actual_buggy=node.is_buggy if node.executed else None,
            actual_improved=actual_improved,
            actual_metric=node.metric if node.executed else None,
        )

    # ---- execution and review ----------------------------------------------------------
    def _run(self, node: Node, debug: bool) -> ExecResult | None:
        timeout = self.budget.exec_timeout(debug=debug)
        if timeout <= 1.0:
            return None
        reset_run_submission(self.layout)
        kind = "debug" if debug else "full"
        log_path = self.layout.node_logs / f"{self.ckpt.groups:04d}-{node.id[:8]}.{kind}.log"
        result = self.s.runner.run(
            node.code, args=["--debug"] if debug else [], timeout_s=timeout, log_path=log_path
        )
        self.ckpt.exec_time_s += result.exec_time
        self.s.events.emit(
            ExecutionEvent(
                ts=datetime.now(UTC),
                node_id=node.id,
                kind=kind,
                exec_time_s=result.exec_time,
                timeout_s=timeout,
                timed_out=result.timed_out,
                exit_code=result.exit_code,
                gpu=self.s.gpu,
            )
        )
        return result

    def execute(self, node: Node, parent: Node | None, prev_best: Node | None) -> None:
        """`--debug` first with its short limit; the full run only when that passed; then review."""
        node.executed = True
        (self.layout.node_logs / f"{self.ckpt.groups:04d}-{node.id[:8]}.py").write_text(
            node.code, encoding="utf-8"
        )
        debug_result = self._run(node, debug=True)
        result = debug_result
        prefix = ""
        if debug_result is not None and debug_result.ok:
            node.debug_run_ok = True
            result = self._run(node, debug=False)
        elif debug_result is not None:
            node.debug_run_ok = False
            prefix = "[The `--debug` run failed, so the full run was not started.]\n"
        if result is None:
            node.term_out = "TimeoutError: no time left in the trial budget to run the script."
            node.exc_type, node.exc_info = "TimeoutError", "trial budget exhausted"
            node.is_buggy, node.analysis = True, "Not run: the trial's time budget was exhausted."
            return
        node.term_out = prefix + result.term_out
        node.exec_time = (debug_result.exec_time if debug_result else 0.0) + (
            result.exec_time if result is not debug_result else 0.0
        )
        node.exit_code, node.timed_out = result.exit_code, result.timed_out
        node.exc_type, node.exc_info = result.exc_type, result.exc_info
        csv_path = self.layout.run_submission_csv
        has_csv = csv_path.is_file() and csv_path.stat().st_size > 0
        node.has_submission = has_csv
        review = self.reviewer.review(node, has_csv, timeout_s=self._llm_timeout())
        node.analysis = review.summary
        node.is_buggy = review.is_buggy
        node.metric = review.metric
        node.lower_is_better = review.lower_is_better
        if not node.is_buggy and self.journal.lower_is_better is None:
            self.journal.lower_is_better = bool(review.lower_is_better)
            self.ckpt.lower_is_better = self.journal.lower_is_better
        if (
            not node.is_buggy
            and node.metric is not None
            and (
                prev_best is None
                or prev_best.metric is None
                or self.journal.better(node.metric, prev_best.metric)
            )
        ):
            self.promote(node)
        log.info(
            "node %s: buggy=%s metric=%s exec=%.1fs",
            node.id[:8],
            node.is_buggy,
            node.metric,
            node.exec_time or 0,
        )

    def promote(self, node: Node) -> None:
        """Copy the new best's submission and code out atomically, before the checkpoint names it."""
        copy_atomic(self.layout.run_submission_csv, self.layout.submission_csv)
        write_text_atomic(self.layout.best_solution, node.code)
        self.ckpt.best_node_id = node.id
        log.info("new best node %s: metric %s", node.id[:8], node.metric)

    # ---- persistence -------------------------------------------------------------------
    def checkpoint(self, *, compact: bool = False) -> None:
        """Persist the journal: one appended line per step; a whole journal.json when the trial stops."""
        self.ckpt.nodes = self.journal.nodes
        self.ckpt.time_used_s = self.budget.used()
        self.ckpt.llm_time_s = self._llm_carried + self.s.llm_time()
        if self.s.downtime is not None:
            self.ckpt.downtime_s = self._downtime_carried + self.s.downtime.paused_s()
        self.ckpt.rng_state = _rng_state(self.rng)
        self.ckpt.lower_is_better = self.journal.lower_is_better
        self.journal_writer.save(self.ckpt, compact=compact)

    def result(self, status: str, reason: str) -> AgentResult:
        best = self.journal.get(self.ckpt.best_node_id)
        return AgentResult(
            trial_id=self.spec.trial_id,
            status="completed" if status == "completed" else "failed",
            stop_reason=reason,
            best_metric=best.metric if best else None,
            lower_is_better=self.journal.lower_is_better,
            best_node_id=best.id if best else None,
            steps=len(self.journal),
            executed=len(self.journal.executed_nodes),
            skipped=len(self.journal.skipped_nodes),
            buggy=len(self.journal.buggy_nodes),
            time_used_s=self.ckpt.time_used_s,
            exec_time_s=self.ckpt.exec_time_s,
            llm_time_s=self.ckpt.llm_time_s,
            downtime_s=self.ckpt.downtime_s,
            resumed=max(0, self.ckpt.sessions - 1),
            has_submission=self.layout.submission_csv.is_file(),
        )
