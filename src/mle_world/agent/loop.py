"""The AIDE loop: each step's parent, candidates, execution and review, within the budget.

Reads spec settings, the journal checkpoint and the data dir; writes journal.json, events, node logs
and result.json. A step's candidates come from agent/coder.py, the world model's part of a step
(its prompts, calls and the gate's choice) from agent/consult.py; agent/best.py keeps the best
submission and code on disk.

Longer than 400 lines because the step, the executions it charges to the budget, the checkpoint
that must replay it and the final result share one trial's state (journal, budget, checkpoint, RNG).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from mle_world.agent import gate
from mle_world.agent.best import BestSolution
from mle_world.agent.budget import Budget, Clock
from mle_world.agent.coder import Coder
from mle_world.agent.consult import Consultant, TaskFacts
from mle_world.agent.events import EventSink
from mle_world.agent.journal import Checkpoint, Journal, JournalWriter, Node, load_checkpoint
from mle_world.agent.llm.client import ChatModel, ContextOverflow, EndpointFailure
from mle_world.agent.llm.downtime import Downtime
from mle_world.agent.policy import select_parent, stage_of
from mle_world.agent.preview import data_preview, task_description
from mle_world.agent.review import Reviewer, printed_metric
from mle_world.agent.sandbox.disk_quota import DiskShortage
from mle_world.agent.sandbox.interpreter import CodeRunner, ExecResult
from mle_world.agent.sandbox.jail import SandboxUnavailable
from mle_world.agent.sandbox.workspace import (
    TrialLayout,
    reset_run_submission,
    set_up_trial_dir,
    stage_submission,
)
from mle_world.agent.seeds import request_seed
from mle_world.records import AgentResult, ExecutionEvent, GateLabel, TrialSpec
from mle_world.storage import write_model

log = logging.getLogger(__name__)


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


def _rng_state(rng: random.Random) -> list[Any]:
    version, internal, gauss = rng.getstate()
    return [version, list(internal), gauss]


def _set_rng_state(rng: random.Random, state: list[Any]) -> None:
    rng.setstate((state[0], tuple(state[1]), state[2]))


class Agent:
    """One trial: `run()` steps until the budget or an infra failure stops it and returns the result.

    The step budget counts executed nodes (AIDE executes exactly one node per step), for the stop
    rule, the budget stage and `<TOTAL_STEPS_REMAINING>` alike: extra candidates and vetoed steps
    cost LLM time but no step.
    """

    def __init__(self, spec: TrialSpec, layout: TrialLayout, services: Services) -> None:
        self.spec = spec
        self.settings = spec.agent
        self.layout = layout
        self.services = services
        self.rng = random.Random(spec.seed)
        set_up_trial_dir(layout)
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
            self._charge_killed_execution()
            log.info(
                "resuming %s: %d nodes, %.1f s used", spec.trial_id, len(loaded.nodes), loaded.time_used_s
            )
        else:
            self.ckpt = Checkpoint(trial_id=spec.trial_id, science_hash=spec.science_hash, sessions=1)
        if spec.lower_is_better is not None:
            self.ckpt.lower_is_better = spec.lower_is_better
            self.ckpt.direction_source = "task"
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
        self._rng_at_step: list[Any] | None = None
        self.coder = Coder(
            services.coder,
            self.settings,
            self.journal,
            self.budget,
            task=self.task,
            preview=self.preview,
            seed=spec.seed,
        )
        self.best = BestSolution(layout, self.journal, self.ckpt)
        if loaded is not None:
            self.best.restore()
        self.reviewer = Reviewer(services.feedback, self.task, obfuscate=self.settings.obfuscate)
        wm = self.settings.world_model
        self.consultant = (
            Consultant(
                services.world,
                wm,
                TaskFacts(self.task, self.preview, services.gpu),
                seed=spec.seed,
                regime=spec.regime,
            )
            if wm.enabled and services.world
            else None
        )

    def _charge_killed_execution(self) -> None:
        """A session killed (SIGKILL) during an execution never checkpointed its time: charge the run
        the least of its limit and the wall time since it started, so a kill never gives time back."""
        started, limit = self.ckpt.execution_started_s, self.ckpt.execution_timeout_s
        if started is None or limit is None:
            return
        since = max(0.0, time.time() - (self.ckpt.execution_started_wall or time.time()))
        charged = started + min(limit, since)
        if charged > self.ckpt.time_used_s:
            log.warning("charging %.1f s for an execution cut off by a kill", charged - self.ckpt.time_used_s)
            self.ckpt.time_used_s = charged
        self.ckpt.execution_started_s = self.ckpt.execution_timeout_s = self.ckpt.execution_started_wall = (
            None
        )

    @property
    def steps_used(self) -> int:
        """Executed nodes: what the step limit, the budget stage and the prompts count."""
        return len(self.journal.executed_nodes)

    # ---- the loop ----------------------------------------------------------------------
    def run(self) -> AgentResult:
        status = "completed"
        reason = "stopped"
        try:
            while True:
                stop = self.budget.stop_reason(self.steps_used)
                if stop is not None:
                    reason = stop
                    break
                self.step()
        except EndpointFailure as error:
            log.error("endpoint failure: %s", error)
            status, reason = "failed", f"endpoint_unavailable: {error}"
        except DiskShortage as error:
            log.error("%s", error)
            status, reason = "failed", f"infra: {error}"
        except SandboxUnavailable as error:
            log.error("sandbox unavailable: %s", error)
            status, reason = "failed", f"sandbox_unavailable: {error}"
        except OSError as error:
            # The agent's own files (a checkpoint, a node log, the graded copy): a disk that filled up
            # (another trial's run, until its files are removed) is the infrastructure's failure, not
            # the agent's, even when the checkpoint below finds room again.
            log.exception("agent I/O error")
            status, reason = "failed", f"infra: {type(error).__name__}: {error}"
        except Preempted:
            self.services.runner.terminate()
            self._end_outages("preempted")
            self.ckpt.execution_started_s = None  # the time of the cut run is in time_used_s now
            self.checkpoint(compact=True)
            raise
        except Exception as error:
            # The harness's own code raised: what the model wrote cannot get here (its scripts run in
            # a sandbox, its replies are parsed defensively), so this is a bug of ours. As the agent's
            # failure it was a settled zero, never retried: a harness bug on one configuration's path
            # (the pydantic build race of the SDK's reply classes once was one) moved its medal rate.
            # As "internal" it is the infrastructure's: `status` names it and `--retry-failed` reruns it
            # (until then a submission it left is graded as it stands, as any failed trial's is).
            log.exception("agent error")
            status, reason = "failed", f"internal: {type(error).__name__}: {error}"
        finally:
            self.services.runner.terminate()
        self._end_outages(reason)
        # This session is alive: the budget clock holds the time of a run it cut or that never started
        # (a full disk refused it). Left marked, a resume (`--retry-failed`) took this session for one
        # killed during that run and charged up to the run's limit for it.
        self.ckpt.execution_started_s = self.ckpt.execution_timeout_s = self.ckpt.execution_started_wall = (
            None
        )
        # The RNG of a step that failed before its nodes joined the journal stays the one it started
        # with: a resume replays that step exactly, as after a preemption (a completed step reset it).
        self.checkpoint(compact=True)
        result = self.result(status, reason)
        write_model(self.layout.result, result)
        return result

    def step(self) -> None:
        # A checkpoint written during this step (before an execution) must replay the step exactly.
        self._rng_at_step = _rng_state(self.rng)
        parent = select_parent(self.journal, self.settings.search, self.rng)
        stage = stage_of(parent)
        wm = self.settings.world_model
        consultant = self.consultant if stage in wm.applies_to else None
        k = wm.candidates if consultant is not None else 1
        group = self.ckpt.groups
        log.info("step %d (group %d): %s with %d candidate(s)", self.steps_used, group, stage, k)
        nodes = self.coder.generate(stage, parent, k, group)
        overflowed = [i for i, n in enumerate(nodes) if n.context_overflow]
        if overflowed:
            # The prompt did not fit even shrunk: record one buggy node for the step, no world model.
            # No gate decision either: the overflowing node gets no label (it is no "not_selected"
            # candidate: it is the step's node), the step's other candidates are not selected.
            consultant = None
            chosen = overflowed[0]
            labels: tuple[GateLabel | None, ...] = tuple(
                None if i == chosen else "not_selected" for i in range(len(nodes))
            )
            outcome = gate.GateOutcome(chosen, labels, (0,) * len(nodes), False)
        elif consultant is not None:
            outcome = consultant.consult(
                parent, nodes, group, self.journal, self.budget, self.ckpt.consecutive_skips
            )
        else:
            outcome = gate.GateOutcome(0, (), (0,), False)
        prev_best = self.journal.best_node()
        executed: Node | None = None
        if outcome.chosen is not None:
            executed = nodes[outcome.chosen]
            if executed.context_overflow:
                executed.executed = True
            else:
                self.execute(executed, parent, prev_best)
        for i, node in enumerate(nodes):
            if outcome.labels:
                node.gate = outcome.labels[i]
            if node is not executed:
                node.skipped = True
                rank = node.prediction.rank if node.prediction else None
                if node.gate == "skip":
                    why = "vetoed by the world model"
                elif executed is None:
                    why = "the world model vetoed the step"
                else:
                    why = "another candidate was run"
                node.analysis = f"Not executed: {why} (gate {node.gate}, predicted rank {rank})."
        used = self.budget.used()
        for node in nodes:
            node.budget_time_s = used
            self.journal.append(node)
        if consultant is not None:
            for node in nodes:
                self.services.events.emit(consultant.prediction_event(node, prev_best, self.journal))
        # Any executed node (also of a stage the gate does not apply to) breaks a run of skips.
        self.ckpt.consecutive_skips = 0 if executed is not None else self.ckpt.consecutive_skips + 1
        self.ckpt.groups = group + 1
        self._rng_at_step = None
        self.checkpoint()

    def _llm_timeout(self) -> float:
        # The client adds its outage window: a request never outlives the trial by more than that.
        return self.budget.left()

    def _end_outages(self, cause: str) -> None:
        if self.services.downtime is not None:
            self.services.downtime.end(cause)

    # ---- execution and review ----------------------------------------------------------
    def _run(self, node: Node, debug: bool) -> ExecResult | None:
        timeout = self.budget.exec_timeout(debug=debug)
        if timeout <= 1.0:
            return None
        reset_run_submission(self.layout)
        kind = "debug" if debug else "full"
        log_path = self.layout.node_logs / f"{self.ckpt.groups:04d}-{node.id[:8]}.{kind}.log"
        # The time used so far is on disk before a run that may last hours and end in a SIGKILL.
        self.ckpt.execution_started_s = self.budget.used()
        self.ckpt.execution_timeout_s = timeout
        self.ckpt.execution_started_wall = time.time()
        # Against a SIGKILL during the run the page cache suffices; the step's own checkpoint fsyncs.
        self.checkpoint(sync=False)
        result = self.services.runner.run(
            node.code, args=["--debug"] if debug else [], timeout_s=timeout, log_path=log_path
        )
        self.ckpt.execution_started_s = self.ckpt.execution_timeout_s = self.ckpt.execution_started_wall = (
            None
        )
        self.ckpt.exec_time_s += result.exec_time
        self.services.events.emit(
            ExecutionEvent(
                ts=datetime.now(UTC),
                node_id=node.id,
                kind=kind,
                exec_time_s=result.exec_time,
                timeout_s=timeout,
                timed_out=result.timed_out,
                exit_code=result.exit_code,
                gpu=self.services.gpu,
                output_bytes=result.output_bytes,
                workspace_bytes=result.workspace_bytes,
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
        if result is None:  # exec_time stays None: no outcome for the world model's calibration
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
        node.submission_sha256 = stage_submission(self.layout)
        has_csv = node.submission_sha256 is not None
        node.has_submission = has_csv
        printed = printed_metric(result.term_out) if result is not debug_result else None
        try:
            review = self.reviewer.review(
                node,
                has_csv,
                timeout_s=self._llm_timeout(),
                seed=request_seed(self.spec.seed, node.group, node.candidate, 0, "review"),
                printed=printed,
            )
        except ContextOverflow as error:
            log.warning("review prompt over the context window: %s", error)
            node.is_buggy, node.context_overflow = True, True
            node.analysis = "Review failed: the review prompt exceeded the context length."
            return
        node.analysis = review.summary
        node.is_buggy = review.is_buggy
        node.metric = review.metric
        node.reviewer_metric, node.printed_metric = review.reviewer_metric, review.printed_metric
        node.metric_mismatch = review.mismatch
        node.lower_is_better = review.lower_is_better
        self.best.consider(node)
        log.info(
            "node %s: buggy=%s metric=%s exec=%.1fs",
            node.id[:8],
            node.is_buggy,
            node.metric,
            node.exec_time or 0,
        )

    # ---- persistence -------------------------------------------------------------------
    def checkpoint(self, *, compact: bool = False, sync: bool = True) -> None:
        """Persist the journal: one appended line per step; a whole journal.json when the trial stops.

        `sync=False`: no fsync (a kill keeps the line; a machine crash may lose it).
        """
        self.ckpt.nodes = self.journal.nodes
        self.ckpt.time_used_s = self.budget.used()
        self.ckpt.llm_time_s = self._llm_carried + self.services.llm_time()
        if self.services.downtime is not None:
            self.ckpt.downtime_s = self._downtime_carried + self.services.downtime.paused_s()
        self.ckpt.rng_state = self._rng_at_step if self._rng_at_step is not None else _rng_state(self.rng)
        self.ckpt.lower_is_better = self.journal.lower_is_better
        self.journal_writer.save(self.ckpt, compact=compact, sync=sync)
        if sync:  # the checkpoint's best survives a machine crash now: older kept CSVs are not needed
            self.best.prune()

    def result(self, status: str, reason: str) -> AgentResult:
        best = self.journal.get(self.ckpt.best_node_id)
        nodes = self.journal.nodes
        consulted = {n.group for n in nodes if n.prediction is not None}
        vetoed = {n.group for n in nodes if n.gate == "skip"}
        good = self.journal.good_nodes
        direction = self.journal.lower_is_better
        return AgentResult(
            trial_id=self.spec.trial_id,
            status="completed" if status == "completed" else "failed",
            stop_reason=reason,
            best_metric=best.metric if best else None,
            lower_is_better=direction,
            best_node_id=best.id if best else None,
            steps=self.ckpt.groups,
            nodes=len(nodes),
            executed=len(self.journal.executed_nodes),
            skipped=len(self.journal.skipped_nodes),
            buggy=len(self.journal.buggy_nodes),
            consulted_steps=len(consulted),
            vetoed_steps=len(vetoed),
            not_selected=sum(1 for n in nodes if n.gate == "not_selected"),
            direction_source=self.ckpt.direction_source,
            direction_disagreements=sum(
                1
                for n in good
                if n.lower_is_better is not None and direction is not None and n.lower_is_better != direction
            ),
            metric_mismatches=sum(1 for n in nodes if n.metric_mismatch),
            context_overflows=sum(1 for n in nodes if n.context_overflow),
            time_used_s=self.ckpt.time_used_s,
            exec_time_s=self.ckpt.exec_time_s,
            llm_time_s=self.ckpt.llm_time_s,
            downtime_s=self.ckpt.downtime_s,
            resumed=max(0, self.ckpt.sessions - 1),
            has_submission=self.layout.submission_csv.is_file(),
            submission_sha256=best.submission_sha256
            if best and self.layout.submission_csv.is_file()
            else None,
        )
