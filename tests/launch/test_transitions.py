"""The named status transitions of `launch/state.py`: what each sets, what it resets, and when it is
refused (nothing written) or illegal (`StateError`).

Writes status.json under pytest's tmp paths; reads src/mle_world to check who writes status.json.
"""

from __future__ import annotations

import ast
from datetime import timedelta
from pathlib import Path

import pytest
from launchkit import update_status

from mle_world.launch.state import (
    JOB_FIELDS,
    RUN_FIELDS,
    Start,
    StateError,
    StatusFields,
    claim,
    is_retryable,
    mark_checkpointed,
    mark_failed_infra,
    mark_finished,
    mark_interrupted,
    mark_submitted,
    read_status,
    record_job_id,
    record_pid,
    release_orphan,
    revert_submission,
    status_path,
    utcnow,
    withdraw_attempt,
)
from mle_world.launch.sweep_summary import estimate_eta
from mle_world.records import TrialStatus

T = "t"
SRC = Path(__file__).resolve().parents[2] / "src" / "mle_world"


def running(d: Path, token: str = "a", job: str | None = "7_0") -> TrialStatus:
    """A trial submitted under `token` and claimed by its job (`job` None: a local worker)."""
    mark_submitted(d, T, token=token, backend="slurm" if job else "local")
    if job:
        record_job_id(d, T, token=token, job_id=job)
    start = Start(job_id=job, array_id=job.split("_")[0] if job else None)
    claimed = claim(d, T, token, start, 3, host="node1", gpu="0")
    assert isinstance(claimed, TrialStatus)
    return claimed


def unchanged(d: Path) -> bytes:
    return status_path(d).read_bytes()


def test_status_fields_are_the_writable_fields_of_the_record() -> None:
    assert set(StatusFields.__annotations__) == set(TrialStatus.model_fields) - {"trial_id", "updated_at"}
    assert set(RUN_FIELDS) | set(JOB_FIELDS) < set(StatusFields.__annotations__)


def test_only_state_py_writes_status_json() -> None:
    """The transitions are the only writers: no module but state.py calls `transact` or writes the file."""
    offenders = []
    for path in SRC.rglob("*.py"):
        if path.name == "state.py" and path.parent.name == "launch":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                if name in ("transact", "_write", "update_status"):
                    offenders.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert offenders == []


def test_mark_submitted_resets_the_previous_attempt(tmp_path: Path) -> None:
    first = running(tmp_path)
    record_pid(tmp_path, T, token="a", pid=4242)
    mark_finished(
        tmp_path, T, token="a", outcome="failed", failure_class="agent", cause="agent failed: x",
        exit_code=1, wall_used_s=5.0, downtime_s=2.0,
    )  # fmt: skip
    update_status(tmp_path, T, requeues=1, preemptions=1, slurm_restarts=1)
    failed = read_status(tmp_path, T)
    assert failed.pid is None and failed.ended_at and failed.wall_used_s == 5.0

    retry = mark_submitted(tmp_path, T, token="b", backend="slurm")
    assert (retry.state, retry.attempt, retry.token, retry.backend) == ("submitted", 2, "b", "slurm")
    assert retry.submitted_at and first.submitted_at and retry.submitted_at > first.submitted_at
    assert retry.wall_used_s == 0.0  # a retry of a failed trial starts its wall clock afresh
    for field, empty in {**RUN_FIELDS, **JOB_FIELDS}.items():
        assert getattr(retry, field) == empty, field
    # Kept across attempts: they count against max_attempts, and the last downtime until a new end.
    assert (retry.requeues, retry.preemptions, retry.downtime_s) == (1, 1, 2.0)


def test_mark_submitted_keeps_interrupted_time_and_a_never_submitted_attempt(tmp_path: Path) -> None:
    running(tmp_path, job=None)
    mark_interrupted(
        tmp_path, T, token="a", to="pending", reason="Ctrl-C", preempted=False, wall_used_s=3.0, exit_code=143
    )
    again = mark_submitted(tmp_path, T, token="b", backend="local")
    assert (again.attempt, again.wall_used_s, again.cause, again.exit_code) == (2, 3.0, None, None)
    # Submitted, but sbatch never gave it a job: the next submission is the same attempt.
    assert mark_submitted(tmp_path, T, token="c", backend="slurm").attempt == 2


@pytest.mark.parametrize("state", ["running", "succeeded"])
def test_mark_submitted_is_illegal_from_running_and_succeeded(tmp_path: Path, state: str) -> None:
    running(tmp_path)
    if state == "succeeded":
        update_status(tmp_path, T, "succeeded")
    before = unchanged(tmp_path)
    with pytest.raises(StateError, match=f"illegal transition {state} → submitted"):
        mark_submitted(tmp_path, T, token="b", backend="slurm")
    assert unchanged(tmp_path) == before


def test_record_job_id_sets_ids_only_for_its_own_submission(tmp_path: Path) -> None:
    mark_submitted(tmp_path, T, token="a", backend="slurm")
    assert record_job_id(tmp_path, T, token="old", job_id="5_0") is None  # superseded submission
    done = record_job_id(tmp_path, T, token="a", job_id="12_3")
    assert done and (done.state, done.slurm_job_id, done.slurm_array_id) == ("submitted", "12_3", "12")
    assert record_job_id(tmp_path, T, token="a", job_id="12_3") is not None  # the same job again
    before = unchanged(tmp_path)
    assert record_job_id(tmp_path, T, token="a", job_id="13_0") is None  # another job: not adopted
    assert unchanged(tmp_path) == before
    mark_submitted(tmp_path, T, token="b", backend="slurm")
    plain = record_job_id(tmp_path, T, token="b", job_id="99")
    assert plain and (plain.slurm_job_id, plain.slurm_array_id) == ("99", None)


def test_revert_submission_restores_the_attempt(tmp_path: Path) -> None:
    mark_submitted(tmp_path, T, token="a", backend="slurm")
    assert revert_submission(tmp_path, T, token="x", prior_attempt=0, cause="c") is None
    first = revert_submission(tmp_path, T, token="a", prior_attempt=0, cause="submission failed: no")
    assert first and (first.state, first.attempt, first.failure_class) == ("pending", 0, "infra")
    assert first.cause == "submission failed: no"
    update_status(tmp_path, T, "failed", attempt=1)
    mark_submitted(tmp_path, T, token="b", backend="slurm")
    retry = revert_submission(tmp_path, T, token="b", prior_attempt=1, cause="submission failed: no")
    assert retry and (retry.state, retry.attempt) == ("failed", 1)


def test_claim_sets_the_run_and_resets_the_last_one(tmp_path: Path) -> None:
    running(tmp_path)
    mark_interrupted(
        tmp_path, T, token="a", to="submitted", reason="USR2", preempted=True, wall_used_s=4.0, exit_code=143
    )
    claimed = claim(tmp_path, T, "a", Start("7_0", "7", restarts=1), 3, host="node2", gpu="1")
    assert isinstance(claimed, TrialStatus)
    assert (claimed.state, claimed.host, claimed.gpu, claimed.requeues, claimed.slurm_restarts) == (
        "running", "node2", "1", 1, 1,
    )  # fmt: skip
    assert claimed.started_at and (claimed.ended_at, claimed.exit_code, claimed.cause, claimed.pid) == (
        None, None, None, None,
    )  # fmt: skip
    assert (claimed.wall_used_s, claimed.preemptions) == (4.0, 1)  # carried within the attempt
    update_status(tmp_path, T, "succeeded")
    before = unchanged(tmp_path)
    assert claim(tmp_path, T, "a", Start("7_0", "7", restarts=2), 3, host="n", gpu=None) == "skipped"
    assert unchanged(tmp_path) == before


def test_record_pid_is_fenced(tmp_path: Path) -> None:
    running(tmp_path)
    assert record_pid(tmp_path, T, token="b", pid=1) is None
    status = record_pid(tmp_path, T, token="a", pid=4242)
    assert status and (status.state, status.pid) == ("running", 4242)


@pytest.mark.parametrize(("to", "preempted"), [("pending", False), ("submitted", True)])
def test_mark_interrupted_carries_time_and_counts_preemptions(
    tmp_path: Path, to: str, preempted: bool
) -> None:
    running(tmp_path)
    update_status(tmp_path, T, wall_used_s=10.0, pid=4242)
    assert mark_interrupted(
        tmp_path, T, token="b", to="pending", reason="x", preempted=True, wall_used_s=1.0, exit_code=143
    ) is None  # fmt: skip
    status = mark_interrupted(
        tmp_path,
        T,
        token="a",
        to=to,
        reason="SIGTERM",
        preempted=preempted,
        wall_used_s=12.5,  # the claim's 10 s + this run's 2.5 s
        exit_code=143,  # type: ignore[arg-type]
    )
    assert status and (status.state, status.wall_used_s, status.preemptions) == (to, 12.5, int(preempted))
    assert (status.pid, status.exit_code, status.cause) == (None, 143, "interrupted (SIGTERM); resumable")
    assert status.ended_at and status.started_at and status.ended_at >= status.started_at


def test_mark_finished_sets_the_verdict_and_counts_all_runs(tmp_path: Path) -> None:
    running(tmp_path)
    update_status(tmp_path, T, wall_used_s=4.0, pid=4242)
    kwargs = {"failure_class": None, "cause": None, "exit_code": 0, "wall_used_s": 10.0, "downtime_s": 1.5}
    assert mark_finished(tmp_path, T, token="b", outcome="succeeded", **kwargs) is None  # type: ignore[arg-type]
    done = mark_finished(tmp_path, T, token="a", outcome="succeeded", **kwargs)  # type: ignore[arg-type]
    assert done and (done.state, done.exit_code, done.downtime_s, done.wall_used_s) == (
        "succeeded",
        0,
        1.5,
        10.0,
    )
    assert (done.pid, done.failure_class, done.cause) == (None, None, None) and done.ended_at


def test_a_late_success_after_the_watchdog_gave_up_is_recorded(tmp_path: Path) -> None:
    running(tmp_path)
    update_status(tmp_path, T, started_at=utcnow() - timedelta(seconds=30))
    lost = mark_failed_infra(tmp_path, T, token="a", cause="slurm job 7_0 unknown to squeue and sacct")
    assert lost and (lost.state, lost.failure_class) == ("failed", "infra")
    assert lost.wall_used_s >= 30  # the lost run's time so far: no supervisor will count it
    done = mark_finished(
        tmp_path, T, token="a", outcome="succeeded", failure_class=None, cause=None, exit_code=0,
        wall_used_s=31.0, downtime_s=0.0,
    )  # fmt: skip
    assert done and (done.state, done.failure_class, done.cause) == ("succeeded", None, None)
    assert done.wall_used_s == 31.0  # the supervisor's measure, not added to the watchdog's estimate


def test_mark_failed_infra_keeps_a_recorded_end_and_never_touches_a_final_trial(tmp_path: Path) -> None:
    running(tmp_path)
    now = mark_failed_infra(tmp_path, T, token="a", cause="spec mismatch")
    assert now and now.ended_at and now.started_at and now.ended_at >= now.started_at
    assert now.wall_used_s == (now.ended_at - now.started_at).total_seconds()  # the run, ended now
    before = unchanged(tmp_path)
    assert mark_failed_infra(tmp_path, T, token="a", cause="again") is None  # failed is final
    assert unchanged(tmp_path) == before

    mark_submitted(tmp_path, T, token="b", backend="slurm")
    record_job_id(tmp_path, T, token="b", job_id="8_0")
    claim(tmp_path, T, "b", Start("8_0", "8"), 3, host="n", gpu=None)
    interrupted = mark_interrupted(
        tmp_path,
        T,
        token="b",
        to="submitted",
        reason="SIGTERM",
        preempted=True,
        wall_used_s=1.0,
        exit_code=143,
    )
    assert interrupted and interrupted.ended_at
    assert mark_failed_infra(tmp_path, T, token="a", cause="stale token") is None
    gone = mark_failed_infra(tmp_path, T, token="b", cause="terminated by SIGTERM and not requeued")
    assert gone and gone.ended_at == interrupted.ended_at  # the run's end, not the giving up
    assert gone.wall_used_s == 1.0  # the interrupted run was counted when it ended, not again
    assert (gone.state, gone.failure_class, gone.cause) == (
        "failed",
        "infra",
        "terminated by SIGTERM and not requeued",
    )


def test_mark_checkpointed_requeues_within_max_attempts(tmp_path: Path) -> None:
    running(tmp_path)
    assert mark_checkpointed(tmp_path, T, token="b", max_attempts=2) is None
    requeue = mark_checkpointed(tmp_path, T, token="a", max_attempts=2)  # attempt 1 + 0 + 1 ≤ 2
    assert requeue and requeue.state == "submitted" and requeue.requeues == 0  # counted at the next start
    assert requeue.cause == "checkpointed; requeue requested after preemption/timeout"
    update_status(tmp_path, T, requeues=1)
    last = mark_checkpointed(tmp_path, T, token="a", max_attempts=2)
    assert last and (last.state, last.failure_class) == ("failed", "infra")
    assert last.cause == "preempted/timed out; attempt 1 + 1 requeues reached max_attempts 2"
    assert mark_checkpointed(tmp_path, T, token="a", max_attempts=9) is None  # final now


def test_release_orphan_does_not_count_the_attempt(tmp_path: Path) -> None:
    running(tmp_path, job=None)
    record_pid(tmp_path, T, token="a", pid=4242)
    released = release_orphan(tmp_path, T)
    assert (released.state, released.attempt, released.pid, released.cause) == (
        "pending", 0, None, "launcher lost; resumable",
    )  # fmt: skip
    assert release_orphan(tmp_path, T).attempt == 0  # never below 0


def test_withdraw_attempt_only_for_this_launch_and_unfinished_trials(tmp_path: Path) -> None:
    update_status(tmp_path, T, "failed", attempt=1)
    marked = mark_submitted(tmp_path, T, token="a", backend="local")
    assert marked.attempt == 2
    assert withdraw_attempt(tmp_path, T, token="b", prior_attempt=1) is None
    back = withdraw_attempt(tmp_path, T, token="a", prior_attempt=1)
    assert back and (back.state, back.attempt) == ("pending", 1)
    update_status(tmp_path, T, "submitted")
    update_status(tmp_path, T, "running")
    update_status(tmp_path, T, "succeeded")
    before = unchanged(tmp_path)
    assert withdraw_attempt(tmp_path, T, token="a", prior_attempt=0) is None  # finished before Ctrl-C
    assert unchanged(tmp_path) == before


def test_every_write_stamps_updated_at(tmp_path: Path) -> None:
    t0 = utcnow() - timedelta(seconds=1)
    status = mark_submitted(tmp_path, T, token="a", backend="local")
    assert status.updated_at and status.updated_at > t0
    assert read_status(tmp_path, T) == status


def test_the_eta_counts_a_finished_trials_runs_once(tmp_path: Path) -> None:
    """A final trial's wall_used_s already holds its last run: the ETA does not add ended − started."""
    running(tmp_path)
    update_status(tmp_path, T, started_at=utcnow() - timedelta(seconds=60))
    done = mark_finished(
        tmp_path, T, token="a", outcome="succeeded", failure_class=None, cause=None, exit_code=0,
        wall_used_s=100.0, downtime_s=0.0,
    )  # fmt: skip
    assert done is not None
    waiting = TrialStatus(trial_id="u")
    now = utcnow()
    started = TrialStatus(trial_id="v", state="running", started_at=now)  # a slot busy for 100 s more
    assert estimate_eta((done, waiting, started), now) == (200.0, 1)


@pytest.mark.parametrize(
    ("attempt", "requeues", "failure_class", "retry_failed", "retried"),
    [
        (1, 0, "infra", "infra", True),
        (2, 0, "infra", "infra", True),
        (3, 0, "infra", "infra", False),  # attempts + requeues reached max_attempts (3)
        (2, 1, "infra", "infra", False),  # Slurm's requeues count too
        (1, 0, "agent", "infra", False),
        (1, 0, "agent", "all", True),
        (1, 0, "infra", None, False),
    ],
)
def test_a_failed_trial_is_retried_only_as_asked_and_within_max_attempts(
    attempt: int, requeues: int, failure_class: str, retry_failed: str | None, retried: bool
) -> None:
    status = TrialStatus(
        trial_id="t",
        state="failed",
        failure_class=failure_class,
        attempt=attempt,
        requeues=requeues,  # type: ignore[arg-type]
    )
    assert is_retryable(status, retry_failed, max_attempts=3) is retried
    assert not is_retryable(status.model_copy(update={"state": "succeeded"}), "all", max_attempts=3)
