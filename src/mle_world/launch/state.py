"""The per-trial state machine kept in `<trial_dir>/status.json` (pending → submitted → running → done)
and its named transitions, the only writers of status.json.

Reads and writes status.json atomically under an advisory lock (`.status.lock`), so the launcher and
the trial job (possibly on another node) never lose each other's updates. Each transition says which
fields it sets, which it resets and when it is refused (returns None, nothing written); a transition
the `ALLOWED` table forbids raises `StateError`. Longer than 400 lines because the machine and every
transition with its resets stay in one place: a reset missed in a scattered write breaks resume.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, TypedDict, get_args

from mle_world import layout
from mle_world.errors import UserError
from mle_world.records import TrialStatus
from mle_world.storage import read_record, write_model

State = Literal["pending", "submitted", "running", "succeeded", "failed"]
STATES: tuple[State, ...] = get_args(State)
FINAL: frozenset[str] = frozenset({"succeeded", "failed"})
ACTIVE: frozenset[str] = frozenset({"submitted", "running"})

ALLOWED: dict[str, frozenset[str]] = {
    "pending": frozenset({"submitted", "failed"}),
    # submitted → pending: Ctrl-C before the trial started, or a submission that never reached sbatch
    "submitted": frozenset({"running", "pending", "failed"}),
    # running → submitted: checkpointed for a requeue; running → pending: local Ctrl-C
    "running": frozenset({"succeeded", "failed", "submitted", "pending"}),
    # failed → succeeded: a job the watchdog gave up on finished after all (recorded truthfully)
    "failed": frozenset({"submitted", "succeeded"}),
    "succeeded": frozenset(),
}
"""Legal transitions; staying in the same state (a field update) is always legal."""


ResumeState = Literal["pending", "submitted"]
"""Where an interrupted trial waits: pending (local backend), submitted (Slurm: a requeue follows)."""


class StatusFields(TypedDict, total=False):
    """The writable fields of `TrialStatus` (all but `trial_id` and `updated_at`), typed."""

    state: State
    attempt: int
    backend: str | None
    slurm_job_id: str | None
    slurm_array_id: str | None
    host: str | None
    gpu: str | None
    submitted_at: datetime | None
    started_at: datetime | None
    ended_at: datetime | None
    failure_class: Literal["infra", "agent"] | None
    cause: str | None
    requeues: int
    wall_used_s: float
    downtime_s: float
    exit_code: int | None
    pid: int | None
    token: str | None
    slurm_restarts: int
    preemptions: int
    launches: tuple[str, ...]


class StateError(RuntimeError):
    """An illegal transition: a bug or two launchers fighting over one trial."""


def utcnow() -> datetime:
    return datetime.now(UTC)


def status_path(trial_dir: Path) -> Path:
    return layout.TrialFiles(trial_dir).status


def read_status(trial_dir: Path, trial_id: str) -> TrialStatus:
    """The trial's status; a trial without status.json is pending."""
    path = status_path(trial_dir)
    status = read_record(path, TrialStatus, "trial status", default=TrialStatus(trial_id=trial_id))
    if status.trial_id != trial_id:
        raise UserError(f"{path}: belongs to trial '{status.trial_id}', expected '{trial_id}'")
    return status


@contextmanager
def _locked(trial_dir: Path) -> Iterator[None]:
    trial_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(layout.TrialFiles(trial_dir).status_lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _write(
    trial_dir: Path, current: TrialStatus, fields: StatusFields, now: Callable[[], datetime]
) -> TrialStatus:
    to = fields.get("state")
    if to is not None and to != current.state and to not in ALLOWED[current.state]:
        raise StateError(f"{current.trial_id}: illegal transition {current.state} → {to}")
    data = current.model_dump()
    data.update(fields)
    data["updated_at"] = now()
    new = TrialStatus.model_validate(data)
    write_model(status_path(trial_dir), new)
    return new


def transact(
    trial_dir: Path,
    trial_id: str,
    change: Callable[[TrialStatus], StatusFields | None],
    *,
    now: Callable[[], datetime] = utcnow,
) -> TrialStatus | None:
    """Read-modify-write under the lock: `change` sees the current status and returns the fields to
    set (`state` included), or None to write nothing. Returns the new status, or None. The named
    transitions below are its callers; a new one belongs beside them."""
    with _locked(trial_dir):
        current = read_status(trial_dir, trial_id)
        fields = change(current)
        return None if fields is None else _write(trial_dir, current, fields, now)


def _always(trial_dir: Path, trial_id: str, change: Callable[[TrialStatus], StatusFields]) -> TrialStatus:
    with _locked(trial_dir):
        current = read_status(trial_dir, trial_id)
        return _write(trial_dir, current, change(current), utcnow)


def is_retryable(status: TrialStatus, retry_failed: str | None, max_attempts: int) -> bool:
    """A failed trial reruns with --retry-failed (infra failures, or all with 'all') while
    attempts + requeues stay under max_attempts (cluster.launch.max_attempts)."""
    if status.state != "failed" or retry_failed is None:
        return False
    if retry_failed == "infra" and status.failure_class != "infra":
        return False
    return status.attempt + status.requeues < max_attempts


# ---------------------------------------------------------------- the named transitions
# Each states what it sets, what it resets and when it is refused (None: nothing written).

RUN_FIELDS: StatusFields = {
    "host": None,
    "gpu": None,
    "started_at": None,
    "ended_at": None,
    "pid": None,
    "exit_code": None,
    "failure_class": None,
    "cause": None,
}
"""What one run of the trial's command records, cleared: a new submission starts without the last one's."""
JOB_FIELDS: StatusFields = {"slurm_job_id": None, "slurm_array_id": None, "slurm_restarts": 0}
"""The Slurm job that carries a submission, cleared: a new submission has no job yet."""


def mark_submitted(
    trial_dir: Path, trial_id: str, *, token: str, backend: str, launch: str | None = None
) -> TrialStatus:
    """A launch takes the trial: pending | failed | submitted → submitted, under a new fencing token.

    Sets `token`, `backend`, `submitted_at`, `launches` (+ `launch`, the launch's id, unless already
    last), `attempt` (+1, except for a trial whose earlier
    submission never reached Slurm: submitted with no job id keeps its attempt) and `wall_used_s`
    (0 for a retry of a failed trial; an interrupted pending trial carries its time over).
    Resets `RUN_FIELDS` and `JOB_FIELDS`. Keeps `requeues` and `preemptions` (they count against
    max_attempts over all attempts) and `downtime_s` (until the run ends). Never refused; from
    running or succeeded it raises `StateError` (running → submitted is the requeue's, not a launch's).
    """

    def change(cur: TrialStatus) -> StatusFields:
        if cur.state not in ("pending", "failed", "submitted"):  # a live run or a success: a bug
            raise StateError(f"{trial_id}: illegal transition {cur.state} → submitted (a new submission)")
        never_ran = cur.state == "submitted" and not cur.slurm_job_id and cur.attempt > 0
        return {
            **RUN_FIELDS,
            **JOB_FIELDS,
            "state": "submitted",
            "attempt": cur.attempt if never_ran else cur.attempt + 1,
            "token": token,
            "backend": backend,
            "submitted_at": utcnow(),
            "wall_used_s": 0.0 if cur.state == "failed" else cur.wall_used_s,
            "launches": cur.launches + ((launch,) if launch and cur.launches[-1:] != (launch,) else ()),
        }

    return _always(trial_dir, trial_id, change)


def record_job_id(trial_dir: Path, trial_id: str, *, token: str, job_id: str) -> TrialStatus | None:
    """The Slurm job that carries the trial's submission (sbatch's answer, or a live task that
    reconciliation adopts); the state is unchanged (the job may already be running).

    Sets `slurm_job_id` and `slurm_array_id` (`123` of `123_4`; None outside an array). Refused when
    the trial's token is not `token` or it already records another job id.
    """

    def change(cur: TrialStatus) -> StatusFields | None:
        if cur.token != token or cur.slurm_job_id not in (None, job_id):
            return None
        return {"slurm_job_id": job_id, "slurm_array_id": job_id.split("_")[0] if "_" in job_id else None}

    return transact(trial_dir, trial_id, change)


def revert_submission(
    trial_dir: Path, trial_id: str, *, token: str, prior_attempt: int, cause: str
) -> TrialStatus | None:
    """sbatch refused the submission, so nothing was queued: submitted → pending (a first attempt)
    or back to failed (a retry).

    Sets `attempt` back to `prior_attempt`, `failure_class` infra and `cause`. Refused when the
    trial's token is not `token`.
    """

    def change(cur: TrialStatus) -> StatusFields | None:
        if cur.token != token:
            return None
        state: State = "pending" if prior_attempt == 0 else "failed"
        return {"state": state, "attempt": prior_attempt, "failure_class": "infra", "cause": cause}

    return transact(trial_dir, trial_id, change)


ClaimVerdict = Literal["skipped", "stale", "failed"]
"""Why a start must not run: skipped (trial final), stale (token or job id not the trial's, or a live
run owns it), failed (Slurm requeued it past max_attempts; recorded failed/infra)."""


@dataclass(frozen=True)
class Start:
    """Who is starting the trial: the Slurm job (and how often Slurm restarted it), or a local worker."""

    job_id: str | None = None
    array_id: str | None = None
    restarts: int = 0
    """SLURM_RESTART_COUNT: each increment is a requeue (preemption, scontrol requeue, node failure)."""


def claim(
    trial_dir: Path,
    trial_id: str,
    token: str | None,
    start: Start,
    max_attempts: int,
    *,
    host: str,
    gpu: str | None,
) -> TrialStatus | ClaimVerdict:
    """The fenced start of a run, before the agent starts: submitted → running (or running →
    running for a Slurm restart of the same job); returns the claimed status, or why this start
    must not run (then nothing is written, except for a trial requeued past max_attempts).

    Sets `host`, `gpu`, `started_at`, `slurm_restarts` (this start's SLURM_RESTART_COUNT),
    `requeues` (+ the restarts since the last start), and the job's `slurm_job_id`/`slurm_array_id`.
    Resets `ended_at`, `pid`, `exit_code`, `failure_class`, `cause`. Refused as "skipped" when the
    trial is final, "stale" when the token or a recorded job id is not this start's or a live run
    owns it; "failed" when attempt + requeues exceed max_attempts (then → failed/infra, with
    `requeues`, `slurm_restarts`, the job ids, `cause` and `ended_at` set).
    """
    verdict: list[ClaimVerdict] = []

    def change(cur: TrialStatus) -> StatusFields | None:
        if cur.state in FINAL:
            verdict.append("skipped")  # e.g. a requeue of a trial that already finished
            return None
        restarted = start.job_id is not None and start.restarts > cur.slurm_restarts
        if (
            cur.token != token
            or (start.job_id and cur.slurm_job_id not in (None, start.job_id))
            or (cur.state == "running" and not restarted)
        ):
            verdict.append("stale")
            return None
        requeues = cur.requeues + max(0, start.restarts - cur.slurm_restarts)
        common: StatusFields = {"requeues": requeues, "slurm_restarts": start.restarts}
        if start.job_id:
            common.update({"slurm_job_id": start.job_id, "slurm_array_id": start.array_id})
        if cur.attempt + requeues > max_attempts:
            verdict.append("failed")
            cause = (
                f"requeued by Slurm {requeues} time(s): attempt {cur.attempt} + {requeues} requeues "
                f"exceed max_attempts {max_attempts}"
            )
            return {
                **common,
                "state": "failed",
                "failure_class": "infra",
                "cause": cause,
                "ended_at": utcnow(),
            }
        return {
            **RUN_FIELDS,
            **common,
            "state": "running",
            "host": host,
            "gpu": gpu,
            "started_at": utcnow(),
        }

    claimed = transact(trial_dir, trial_id, change)
    return verdict[0] if verdict or claimed is None else claimed


def record_pid(trial_dir: Path, trial_id: str, *, token: str | None, pid: int) -> TrialStatus | None:
    """The running command's process group (diagnostic). Sets `pid`; refused when the token is not `token`."""

    def change(cur: TrialStatus) -> StatusFields | None:
        return None if cur.token != token else {"pid": pid}

    return transact(trial_dir, trial_id, change)


def mark_interrupted(
    trial_dir: Path,
    trial_id: str,
    *,
    token: str | None,
    to: ResumeState,
    reason: str,
    preempted: bool,
    wall_used_s: float,
    exit_code: int | None,
) -> TrialStatus | None:
    """A run stopped by Ctrl-C, SIGTERM or a preemption, resumable: running → `to`.

    Sets `wall_used_s` (the attempt's run time with this run, measured by the supervisor: carried
    into the next run's wall limit), `preemptions` (+1 when
    Slurm asked for the stop), `exit_code`, `ended_at` and `cause` ("interrupted (<reason>);
    resumable"). Resets `pid`. Refused when the trial's token is not `token`.
    """

    def change(cur: TrialStatus) -> StatusFields | None:
        if cur.token != token:
            return None
        return {
            "state": to,
            "preemptions": cur.preemptions + int(preempted),
            "wall_used_s": wall_used_s,
            "exit_code": exit_code,
            "pid": None,
            "ended_at": utcnow(),
            "cause": f"interrupted ({reason}); resumable",
        }

    return transact(trial_dir, trial_id, change)


def mark_finished(
    trial_dir: Path,
    trial_id: str,
    *,
    token: str | None,
    outcome: Literal["succeeded", "failed"],
    failure_class: Literal["infra", "agent"] | None,
    cause: str | None,
    exit_code: int | None,
    wall_used_s: float,
    downtime_s: float,
) -> TrialStatus | None:
    """The command ended and was classified: running → succeeded | failed (also failed →
    succeeded: a job the watchdog gave up on finished after all, recorded truthfully).

    Sets `failure_class` and `cause` (None for a success), `exit_code`, `downtime_s`,
    `wall_used_s` (the attempt's run time with this run, measured by the supervisor: what the trial
    took; absolute, so a run the watchdog already counted as lost is not counted twice) and
    `ended_at`. Resets `pid`. Refused when the trial's token is not `token`.
    """

    def change(cur: TrialStatus) -> StatusFields | None:
        if cur.token != token:
            return None
        return {
            "state": outcome,
            "failure_class": failure_class,
            "cause": cause,
            "exit_code": exit_code,
            "downtime_s": downtime_s,
            "wall_used_s": wall_used_s,
            "ended_at": utcnow(),
            "pid": None,
        }

    return transact(trial_dir, trial_id, change)


def _failed_infra(cur: TrialStatus, cause: str) -> StatusFields:
    # A run that recorded its end keeps it (an interrupted run, already in wall_used_s); a run still
    # marked running ends now, and its time so far joins wall_used_s (no supervisor will add it).
    now = utcnow()
    fields: StatusFields = {
        "state": "failed",
        "failure_class": "infra",
        "cause": cause,
        "ended_at": cur.ended_at or now,
    }
    if cur.state == "running" and cur.started_at is not None:
        fields["wall_used_s"] = cur.wall_used_s + max(0.0, (now - cur.started_at).total_seconds())
    return fields


def mark_failed_infra(trial_dir: Path, trial_id: str, *, token: str | None, cause: str) -> TrialStatus | None:
    """The infrastructure ended the trial — its Slurm job died or vanished, a SIGTERM was not
    followed by a requeue, spec.json was refused at start: pending | submitted | running → failed.

    Sets `failure_class` infra, `cause` and `ended_at` (kept when the last run recorded its end);
    from running also `wall_used_s` (+ the run's time until now). Refused when the trial is final
    or its token is not `token`.
    """

    def change(cur: TrialStatus) -> StatusFields | None:
        if cur.state in FINAL or cur.token != token:
            return None
        return _failed_infra(cur, cause)

    return transact(trial_dir, trial_id, change)


def mark_checkpointed(
    trial_dir: Path, trial_id: str, *, token: str | None, max_attempts: int
) -> TrialStatus | None:
    """submitit's checkpoint (USR2: preemption or time limit) after the run stopped: → submitted,
    and a requeue follows, while one more run stays within max_attempts (attempt + requeues + 1);
    else → failed/infra. The requeue is counted when the job starts again (`claim`).

    Sets `cause` (and, when failed, `failure_class` infra and `ended_at` as `mark_failed_infra`).
    Refused when the trial is final or its token is not `token`.
    """

    def change(cur: TrialStatus) -> StatusFields | None:
        if cur.state in FINAL or cur.token != token:
            return None
        if cur.attempt + cur.requeues + 1 > max_attempts:
            return _failed_infra(
                cur,
                f"preempted/timed out; attempt {cur.attempt} + {cur.requeues} requeues "
                f"reached max_attempts {max_attempts}",
            )
        return {"state": "submitted", "cause": "checkpointed; requeue requested after preemption/timeout"}

    return transact(trial_dir, trial_id, change)


def release_orphan(trial_dir: Path, trial_id: str) -> TrialStatus:
    """A trial left submitted or running by a local launcher that is gone (this launcher holds the
    launcher lock, so nothing supervises it): interrupted, not failed → pending.

    Sets `attempt` (−1: the interrupted attempt does not count) and `cause` ("launcher lost;
    resumable"). Resets `pid`. Never refused (the caller holds the launcher lock).
    """

    def change(cur: TrialStatus) -> StatusFields:
        return {
            "state": "pending",
            "attempt": max(0, cur.attempt - 1),
            "cause": "launcher lost; resumable",
            "pid": None,
        }

    return _always(trial_dir, trial_id, change)


def withdraw_attempt(trial_dir: Path, trial_id: str, *, token: str, prior_attempt: int) -> TrialStatus | None:
    """Ctrl-C of the local launcher: a trial this launch submitted (and maybe ran and left
    pending) goes back to pending, its attempt not counted.

    Sets `attempt` back to `prior_attempt`. Refused when the trial is neither submitted nor pending
    (it ended before the Ctrl-C) or its token is not `token`.
    """

    def change(cur: TrialStatus) -> StatusFields | None:
        if cur.state not in ("submitted", "pending") or cur.token != token:
            return None
        return {"state": "pending", "attempt": prior_attempt}

    return transact(trial_dir, trial_id, change)
