"""The per-trial state machine kept in `<trial_dir>/status.json` (pending → submitted → running → done).

Reads and writes status.json atomically under an advisory lock (`.status.lock`), so the launcher and
the trial job (possibly on another node) never lose each other's updates.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import ValidationError

from mle_world.errors import UserError
from mle_world.records import TrialStatus
from mle_world.storage import write_model

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


class StateError(RuntimeError):
    """An illegal transition: a bug or two launchers fighting over one trial."""


def utcnow() -> datetime:
    return datetime.now(UTC)


def status_path(trial_dir: Path) -> Path:
    return trial_dir / "status.json"


def read_status(trial_dir: Path, trial_id: str) -> TrialStatus:
    """The trial's status; a trial without status.json is pending."""
    path = status_path(trial_dir)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return TrialStatus(trial_id=trial_id)
    try:
        status = TrialStatus.model_validate_json(text)
    except ValidationError as exc:
        raise UserError(f"{path}: not a valid trial status ({exc.errors()[0]['msg']})") from None
    if status.trial_id != trial_id:
        raise UserError(f"{path}: belongs to trial '{status.trial_id}', expected '{trial_id}'")
    return status


@contextmanager
def _locked(trial_dir: Path) -> Iterator[None]:
    trial_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(trial_dir / ".status.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def transact(
    trial_dir: Path,
    trial_id: str,
    change: Callable[[TrialStatus], dict[str, Any] | None],
    *,
    now: Callable[[], datetime] = utcnow,
) -> TrialStatus | None:
    """Read-modify-write under the lock: `change` sees the current status and returns the fields to
    set (`state` included), or None to write nothing. Returns the new status, or None."""
    with _locked(trial_dir):
        current = read_status(trial_dir, trial_id)
        fields = change(current)
        if fields is None:
            return None
        to = fields.get("state")
        if to is not None and to != current.state and to not in ALLOWED[current.state]:
            raise StateError(f"{trial_id}: illegal transition {current.state} → {to}")
        data = current.model_dump()
        data.update(fields)
        data["updated_at"] = now()
        new = TrialStatus.model_validate(data)
        write_model(status_path(trial_dir), new)
        return new


def update_status(
    trial_dir: Path,
    trial_id: str,
    to: State | None = None,
    *,
    only_if: Callable[[TrialStatus], bool] | None = None,
    now: Callable[[], datetime] = utcnow,
    **fields: Any,
) -> TrialStatus | None:
    """Read-modify-write status.json under the lock; returns the new status, or None when
    `only_if` rejected the current one (nothing written)."""

    def change(current: TrialStatus) -> dict[str, Any] | None:
        if only_if is not None and not only_if(current):
            return None
        return {**fields, "state": to} if to is not None else dict(fields)

    return transact(trial_dir, trial_id, change, now=now)


def holds(token: str | None) -> Callable[[TrialStatus], bool]:
    """`only_if` for writes by a trial job: the status still names this job's submission."""
    return lambda status: status.token == token


def is_retryable(status: TrialStatus, retry_failed: str | None, max_attempts: int) -> bool:
    """A failed trial reruns with --retry-failed (infra failures, or all with 'all') while
    attempts + requeues stay under max_attempts (cluster.launch.max_attempts)."""
    if status.state != "failed" or retry_failed is None:
        return False
    if retry_failed == "infra" and status.failure_class != "infra":
        return False
    return status.attempt + status.requeues < max_attempts


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
    """The transition into `running`, in one read-modify-write under the lock, before the agent
    starts: returns the claimed status, or why this start must not run (then nothing is written,
    except the failed/infra of a trial requeued past max_attempts). A Slurm restart (a higher
    SLURM_RESTART_COUNT than the trial's `slurm_restarts`) adds to `requeues`."""
    verdict: list[ClaimVerdict] = []

    def change(cur: TrialStatus) -> dict[str, Any] | None:
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
        ids: dict[str, Any] = {}
        if start.job_id:
            ids = {"slurm_job_id": start.job_id, "slurm_array_id": start.array_id}
        common = {"requeues": requeues, "slurm_restarts": start.restarts, **ids}
        if cur.attempt + requeues > max_attempts:
            verdict.append("failed")
            cause = (
                f"requeued by Slurm {requeues} time(s): attempt {cur.attempt} + {requeues} requeues "
                f"exceed max_attempts {max_attempts}"
            )
            return {
                "state": "failed",
                "failure_class": "infra",
                "cause": cause,
                "ended_at": utcnow(),
                **common,
            }
        return {
            "state": "running",
            "host": host,
            "gpu": gpu,
            "started_at": utcnow(),
            "ended_at": None,
            "pid": None,
            "exit_code": None,
            "failure_class": None,
            "cause": None,
            **common,
        }

    claimed = transact(trial_dir, trial_id, change)
    return verdict[0] if verdict or claimed is None else claimed
