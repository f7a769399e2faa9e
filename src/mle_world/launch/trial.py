"""The per-trial job, identical for the local pool and Slurm: spec → running → command → hook → done.

Reads spec.json, result.json and logs/launcher.log of one trial; writes spec.json, status.json and
logs/launcher.log. The command runs in its own session with a hard wall limit enforced from outside.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import BinaryIO, Literal, Protocol, runtime_checkable

from mle_world.errors import UserError
from mle_world.launch.gpus import gpu_environment
from mle_world.launch.memory_cgroup import OOM_PRIORITY, oom_cause, own_memory_cgroup
from mle_world.launch.state import (
    ResumeState,
    Start,
    claim,
    mark_failed_infra,
    mark_finished,
    mark_interrupted,
    read_status,
    record_pid,
    utcnow,
)
from mle_world.launch.verdict import Verdict, classify, last_log_line, read_result
from mle_world.layout import SUBMISSION_RELPATH, TrialFiles
from mle_world.plan.cluster import KILL_GRACE_S
from mle_world.plan.sweep import PlannedTrial
from mle_world.records import DowntimeEvent, TrialSpec, TrialStatus
from mle_world.storage import Unreadable, load_record, read_text, write_model

Outcome = Literal["succeeded", "failed", "interrupted", "skipped", "stale"]
"""skipped: the trial was already final; stale: this job's fencing token is not the trial's."""
PostTrial = Callable[[PlannedTrial, Literal["succeeded", "failed"]], None]
"""Runs on the host after the agent exits, with the trial's final state: costs and grading. It runs for
every trial that ended: its costs are spent whatever the outcome (a failed trial without a submission
too); it grades succeeded trials and failed ones that left a submission (`to_grade`: MLE-bench grades
whatever the agent left)."""


@runtime_checkable
class RecordingPostTrial(Protocol):
    """A post-trial step with a second step, `recorded`, run once status.json says how the trial ended (the
    CLI's `TrialFinisher` writes the audit's digest of the trial there; a plain PostTrial has none)."""

    def __call__(self, trial: PlannedTrial, state: Literal["succeeded", "failed"]) -> None: ...

    def recorded(self, trial: PlannedTrial) -> None: ...


CHECKPOINT_EXITS = (143, 140, -signal.SIGTERM, -signal.SIGUSR2)
"""Exit codes of an agent that checkpointed on SIGTERM/SIGUSR2 (143 by contract)."""


class SpecMismatchError(UserError):
    """spec.json on disk has another science hash than the planned trial."""


def to_grade(state: str, trial_dir: Path) -> bool:
    """Whether a trial that ended in `state` is graded: it succeeded, or it failed leaving a submission
    (graded as it stands: a failed trial's best so far still counts)."""
    return state == "succeeded" or (state == "failed" and (trial_dir / SUBMISSION_RELPATH).is_file())


@dataclass(frozen=True)
class TrialJob:
    """Everything needed to run one trial anywhere (picklable: Slurm ships it to the node)."""

    trial: PlannedTrial
    command: str
    backend: str
    budget_s: float
    grace_s: float
    max_attempts: int = 3
    token: str | None = None
    """Fencing token of the submission that carries this job; must match status.json to start."""
    kill_grace_s: float = KILL_GRACE_S
    """SIGTERM → SIGKILL delay when stopping the command's process group."""
    poll_s: float = 0.2
    settle_s: float = 5.0
    """How long an unexpected checkpoint exit (143) waits for the signal that explains it."""

    @property
    def wall_limit_s(self) -> float:
        return self.budget_s + self.grace_s

    @property
    def trial_dir(self) -> Path:
        return self.trial.trial_dir

    @property
    def trial_id(self) -> str:
        return self.trial.trial_id


def ensure_spec(trial: PlannedTrial) -> None:
    """Write spec.json; an existing one with another science hash is refused (never overwritten)."""
    path = TrialFiles(trial.trial_dir).spec
    old = load_record(path, TrialSpec)
    if isinstance(old, Unreadable) and not old.missing:
        raise SpecMismatchError(f"{path}: unreadable spec; move the trial directory away")
    if not isinstance(old, Unreadable):
        if old.science_hash != trial.spec.science_hash:
            raise SpecMismatchError(
                f"{path}: science hash {old.science_hash} differs from this sweep's "
                f"{trial.spec.science_hash}; use another --output-dir"
            )
        if old == trial.spec:
            return
    # Same science, maybe other transport fields (endpoint URL): the newest plan wins.
    write_model(path, trial.spec)


def recorded_downtime_s(trial_dir: Path, now: datetime | None = None) -> float:
    """Endpoint downtime in the trial's events.jsonl, over all its sessions: closed outages plus an
    open one up to `now`. The agent's budget stood still meanwhile, so the wall limit stretches by it."""
    try:
        text = read_text(TrialFiles(trial_dir).events, errors="replace")
    except OSError:
        return 0.0
    total = 0.0
    open_since: dict[str, datetime] = {}
    for line in text.splitlines():
        if '"downtime"' not in line:
            continue
        try:
            event = DowntimeEvent.model_validate_json(line)
        except ValueError:
            continue
        if event.phase == "down":
            open_since[event.role] = event.ts
        else:
            open_since.pop(event.role, None)
            total += event.downtime_s or 0.0
    now = now or utcnow()
    return total + sum(max(0.0, (now - since).total_seconds()) for since in open_since.values())


def kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class TrialSupervisor:
    """Supervises one run of a TrialJob on this host: claims the trial, starts its command, enforces
    the wall limit and records how it ended. `request_stop` (from a signal handler or Ctrl-C) makes
    `run` stop the command's process group and leave the trial resumable in `resume_state`."""

    def __init__(
        self,
        job: TrialJob,
        *,
        gpu: str | None,
        post_trial: PostTrial | None,
        resume_state: ResumeState,
        env: Mapping[str, str] | None = None,
        host: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.job = job
        self.gpu = gpu
        self.post_trial = post_trial
        self.resume_state = resume_state
        self.env = dict(os.environ if env is None else env)
        self.host = host or socket.gethostname()
        self.clock = clock
        self._stop = threading.Event()
        self._stop_reason = ""
        self._preempted = False

    def request_stop(self, reason: str, *, preempted: bool = False) -> None:
        """Stop the command (SIGTERM to its group) and leave the trial resumable; `preempted` marks
        a stop that Slurm asked for (counted in status.preemptions)."""
        if not self._stop.is_set():
            self._stop_reason = reason
            self._preempted = preempted
            self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def claim(self, start: Start) -> TrialStatus | Outcome:
        """Check this start's fencing token and mark the trial running (`state.claim`)."""
        job = self.job
        return claim(
            job.trial_dir, job.trial_id, job.token, start, job.max_attempts, host=self.host, gpu=self.gpu
        )

    def run(self, start: Start | None = None) -> Outcome:
        job = self.job
        if self._stop.is_set():
            return "interrupted"
        claimed = self.claim(start or Start())
        if not isinstance(claimed, TrialStatus):
            return claimed  # a stale start leaves the trial directory untouched
        status = claimed
        try:
            ensure_spec(job.trial)
        except SpecMismatchError as exc:
            mark_failed_infra(job.trial_dir, job.trial_id, token=job.token, cause=str(exc))
            return "failed"
        files = TrialFiles(job.trial_dir)
        files.logs.mkdir(parents=True, exist_ok=True)
        # A result.json left by an earlier attempt must not be mistaken for this run's.
        if files.result.exists():
            os.replace(files.result, files.previous_result)
        env = dict(self.env)
        env.update(gpu_environment(self.gpu, env))
        log_path = files.launcher_log
        budget_left = job.wall_limit_s - status.wall_used_s
        with open(log_path, "ab") as log:
            log.write(
                f"[launcher] {utcnow().isoformat()} start attempt {status.attempt} on {self.host} "
                f"gpu={self.gpu} wall left {budget_left:.0f} s\n".encode()
            )
            log.flush()
            cgroup = own_memory_cgroup()
            oom_before = cgroup.oom_kills() if cgroup is not None else None
            started = self.clock()
            proc = subprocess.Popen(
                ["bash", "-c", OOM_PRIORITY + job.command],
                cwd=job.trial_dir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # own process group: the whole tree is killed together
            )
            record_pid(job.trial_dir, job.trial_id, token=job.token, pid=proc.pid)
            timed_out = self._supervise(proc, started + budget_left, log)
            # Leftovers of the group (background children) never outlive the trial.
            kill_group(proc.pid, signal.SIGKILL)
            exit_code = proc.returncode
            elapsed = self.clock() - started
            log.write(f"[launcher] {utcnow().isoformat()} exit {exit_code} after {elapsed:.1f} s\n".encode())
        # Absolute, from the claim: if the watchdog declared this run lost meanwhile (and counted
        # its time so far), a late end still counts it once.
        wall_used = status.wall_used_s + elapsed

        if exit_code in CHECKPOINT_EXITS and not timed_out and not self._stop.is_set():
            # The agent saw the preemption signal before we did; give ours a moment to arrive.
            self._stop.wait(job.settle_s)
        if self._stop.is_set() and not timed_out:
            mark_interrupted(
                job.trial_dir,
                job.trial_id,
                token=job.token,
                to=self.resume_state,
                reason=self._stop_reason,
                preempted=self._preempted,
                wall_used_s=wall_used,
                exit_code=exit_code,
            )
            return "interrupted"
        result = read_result(job.trial_dir)
        verdict = classify(
            exit_code,
            result,
            timed_out=timed_out,
            limit_text=f"{job.budget_s:.0f}+{job.grace_s:.0f}",
            last_line=last_log_line(log_path),
        )
        if verdict.state == "failed" and result is None and not timed_out:
            oom = oom_cause(cgroup, oom_before)  # a SIGKILL, or an exit after a child was killed
            verdict = Verdict("failed", "infra", f"{oom} ({verdict.cause})") if oom else verdict
        if not self._holds_trial():
            # The watchdog declared this run lost and a later attempt holds the trial now: grading here
            # would stamp this run's submission with that attempt (grading reads status.json's), and the
            # audit would count it as the later attempt's result. That attempt grades its own.
            with open(log_path, "ab") as log:
                log.write(b"[launcher] a later attempt holds the trial: this run's end is not recorded\n")
            return "stale"
        if self.post_trial is not None:  # every ended trial's costs count; it grades what `to_grade` says
            try:
                self.post_trial(job.trial, verdict.state)
            except Exception as exc:  # any hook crash is an infra failure of this trial, not of the sweep
                hook = f"post-trial hook failed: {type(exc).__name__}: {exc}"
                if verdict.state == "succeeded":
                    verdict = Verdict("failed", "infra", hook)
                else:
                    verdict = Verdict("failed", verdict.failure_class, f"{verdict.cause}; {hook}")
        recorded = mark_finished(
            job.trial_dir,
            job.trial_id,
            token=job.token,
            outcome=verdict.state,
            failure_class=verdict.failure_class,
            cause=verdict.cause,
            exit_code=exit_code,
            wall_used_s=wall_used,
            downtime_s=result.downtime_s if result is not None else recorded_downtime_s(job.trial_dir),
        )
        if recorded is not None and isinstance(self.post_trial, RecordingPostTrial):
            try:
                self.post_trial.recorded(job.trial)
            except Exception as exc:  # the end is recorded; the step after it only saves the audit reads
                with open(log_path, "ab") as log:
                    log.write(
                        f"[launcher] after the end was recorded: {type(exc).__name__}: {exc}\n".encode()
                    )
        return verdict.state if recorded is not None else "stale"

    def _holds_trial(self) -> bool:
        """Whether status.json still carries this job's fencing token (no later attempt took the trial)."""
        try:
            return read_status(self.job.trial_dir, self.job.trial_id).token == self.job.token
        except UserError:
            return False

    def _supervise(self, proc: subprocess.Popen[bytes], deadline: float, log: BinaryIO) -> bool:
        """Wait for the command; on the wall limit or a stop request terminate its group. True = timed out.

        The wall limit stretches by the endpoint downtime the agent recorded (its budget clock
        stood still then), read only when the limit is reached.
        """
        stretched = 0.0
        while True:
            try:
                proc.wait(timeout=self.job.poll_s)
                return False
            except subprocess.TimeoutExpired:
                pass
            if self._stop.is_set():
                self._terminate(proc)
                return False
            if self.clock() < deadline + stretched:
                continue
            downtime = recorded_downtime_s(self.job.trial_dir)
            if downtime > stretched + 1e-3:
                log.write(
                    f"[launcher] wall limit stretched by {downtime:.0f} s of endpoint downtime\n".encode()
                )
                log.flush()
                stretched = downtime
                continue
            self._terminate(proc)
            return True

    def _terminate(self, proc: subprocess.Popen[bytes]) -> None:
        # SIGTERM lets the agent checkpoint its journal (exit 143); SIGKILL if it does not stop in time.
        kill_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=self.job.kill_grace_s)
        except subprocess.TimeoutExpired:
            kill_group(proc.pid, signal.SIGKILL)
            proc.wait()
