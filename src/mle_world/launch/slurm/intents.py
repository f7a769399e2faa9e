"""Slurm submissions as recorded intents: which trials go into which array (by a job name Slurm keeps),
written before sbatch and submitted under a fencing token, and their reconciliation with squeue when a
launcher starts.

Reads and writes `<output_dir>/slurm/intents/<submission>.json`; reads trials' status.json and records
adopted job ids in it; asks squeue through the `Submitter` and cancels orphan tasks through it.
"""

from __future__ import annotations

import functools
import os
import signal
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

from mle_world import layout
from mle_world.errors import UserError
from mle_world.launch.slurm.backend import SlurmTrial, Submitter, array_chunks, slurm_parameters
from mle_world.launch.slurm.limits import check_wall, first_wave
from mle_world.launch.slurm.queries import LiveTask
from mle_world.launch.slurm.throttle import ArrayThrottle
from mle_world.launch.state import FINAL, read_status, record_job_id, revert_submission, utcnow
from mle_world.plan.sweep_plan import SweepPlan, TrialCommand
from mle_world.records import Record
from mle_world.storage import Unreadable, load_record, write_model

KILL_AT_ENV = "MLEW_TEST_KILL_LAUNCHER_AT"
"""Test hook: the launcher SIGKILLs itself at this point of a Slurm submission (`before-sbatch`,
`after-sbatch`: sbatch answered but nothing recorded, `recorded-N`: after N trials got their job id)."""


def _kill_point(name: str) -> None:
    if os.environ.get(KILL_AT_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)


class SubmissionIntent(Record):
    """slurm/intents/<submission>.json: a submission's job name and its trials in array-task order."""

    submission: str
    """Also the trials' fencing token (status.json `token`) and the pickled jobs' token."""
    job_name: str
    trial_ids: tuple[str, ...]
    """Array task i runs trial_ids[i]."""
    created_at: datetime
    array_id: str | None = None
    """Set once sbatch answered (None: killed before that, or sbatch refused)."""


class SweepCancel(Record):
    """slurm/cancelled.json: `run_paper.py cancel` ran on this sweep."""

    cancelled_at: datetime
    tasks: int
    """Pending or running tasks it cancelled."""


def cancelled_since(output_dir: Path, since: datetime) -> bool:
    """Whether `run_paper.py cancel` ran on this sweep after `since` (a launcher's start): a launcher
    that watches then submits none of the trials it held back (they stay pending for a re-run)."""
    record = load_record(layout.OutputFiles(output_dir).cancelled, SweepCancel)
    return not isinstance(record, Unreadable) and record.cancelled_at > since


def intents_dir(output_dir: Path) -> Path:
    return layout.OutputFiles(output_dir).intents


def record_intent(output_dir: Path, regime: str, trial_ids: Sequence[str]) -> tuple[Path, SubmissionIntent]:
    """A new submission id and job name for these trials, on disk before anything is submitted."""
    submission = uuid.uuid4().hex[:10]
    intent = SubmissionIntent(
        submission=submission,
        job_name=f"mlew-{regime}-{submission}",
        trial_ids=tuple(trial_ids),
        created_at=utcnow(),
    )
    path = intents_dir(output_dir) / f"{submission}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_model(path, intent)
    return path, intent


def submit_recorded(
    plan: SweepPlan,
    todo: Sequence[TrialCommand],
    submitter: Submitter,
    *,
    mark: Callable[[str], dict[str, int]],
    call: Callable[[TrialCommand, str], SlurmTrial],
    throttle: ArrayThrottle,
) -> tuple[str, str]:
    """Submit `todo` as one array, within the sweep's one concurrency limit (`throttle`: a share of
    the slots the sweep's live arrays leave, or after all of them with the whole limit). The intent
    (job name → trials, in array order) is on disk before sbatch runs, and `mark(token)` makes each
    trial carry the submission id as its fencing token (returning the previous attempt numbers):
    whatever happens to this process from here on, a re-run finds the array by name and no trial runs
    twice. Returns the line that reports the submission and the array's id."""
    intent_path, intent = record_intent(plan.output_dir, plan.regime, [cmd.trial.trial_id for cmd in todo])
    submission = intent.submission
    prior = mark(submission)
    # One array per submission; the budget (hence --time) is the same for every trial of a plan.
    budget = max(cmd.trial.spec.agent.budget.time_limit_s for cmd in todo)
    params = slurm_parameters(plan.cluster, budget, intent.job_name, len(todo))
    limit, dependency = throttle.next_array(len(todo))
    params["array_parallelism"] = limit
    if dependency is not None:
        params["dependency"] = dependency  # keeps the sweep within array_parallelism
    calls = [call(cmd, submission) for cmd in todo]
    _kill_point("before-sbatch")
    try:
        ids = submitter.submit(calls, params)
    except Exception as exc:  # sbatch refused: nothing was queued, so undo the marks
        for cmd in todo:
            revert_submission(
                cmd.trial.trial_dir,
                cmd.trial.trial_id,
                token=submission,
                prior_attempt=prior[cmd.trial.trial_id],
                cause=f"submission failed: {exc}",
            )
        # sbatch names the culprit on its first line ("invalid partition specified: gpux"), the
        # verdict on its last ("Batch job submission failed: ..."): one line with both
        said = [ln.strip().removeprefix("sbatch: error: ") for ln in str(exc).splitlines() if ln.strip()]
        raise UserError(f"--backend slurm: submission failed: sbatch: {'; '.join(said)}") from None
    _kill_point("after-sbatch")
    first = ids[0].split("_")[0]
    throttle.submitted(first, len(ids), limit, dependency)
    write_model(intent_path, intent.model_copy(update={"array_id": first}))
    for n, (cmd, job_id) in enumerate(zip(todo, ids, strict=True), start=1):
        # Only the ids (a re-run's reconciliation may adopt a task that already started).
        record_job_id(cmd.trial.trial_dir, cmd.trial.trial_id, token=submission, job_id=job_id)
        _kill_point(f"recorded-{n}")
    if not submitter.release([first]):
        raise UserError(
            f"--backend slurm: submitted job {first}, but `scontrol release {first}` failed and its tasks "
            "stay held: re-run the same command (it releases the arrays it adopts) or release it yourself"
        )
    queued = f", after job(s) {', '.join(dependency.split(':')[1:])}" if dependency is not None else ""
    return (
        f"[launch] slurm: submitted {len(ids)} trials as job {first} "
        f"(parallelism {params['array_parallelism']}, time {params['time']} min{queued})"
    ), first


def submit_arrays(
    plan: SweepPlan,
    todo: Sequence[TrialCommand],
    submitter: Submitter,
    *,
    mark: Callable[[Sequence[TrialCommand], str], dict[str, int]],
    call: Callable[[TrialCommand, str], SlurmTrial],
    say: Callable[[str], None],
    throttle: ArrayThrottle,
    say_limit: bool = True,
) -> list[TrialCommand]:
    """Submit `todo` as one array, or as several of at most the cluster's MaxArraySize (or
    slurm.max_array_tasks) trials, all of them and the sweep's live arrays within one
    array_parallelism (`throttle`: each new array gets the slots left, or waits for the live arrays).
    A refused later array leaves the earlier ones
    submitted and says so: a re-run submits the rest. A submit-count limit of the accounting
    (MaxSubmitJobs…, every array task counts) lets only a first wave go now: returns the trials held
    back (still pending), which the caller submits as the first ones end (`say_limit=False`: without
    repeating the limit at each wave)."""
    budget = max(cmd.trial.spec.agent.budget.time_limit_s for cmd in todo)
    minutes = slurm_parameters(plan.cluster, budget, "", 1)["time"]
    submitter.check_time_limit(plan.cluster.slurm.partition, minutes)
    limits = submitter.limits(plan.cluster.slurm)
    check_wall(limits, minutes)
    n_now, tightest = first_wave(len(todo), limits)
    if tightest is not None and say_limit:
        now = (
            f"submitting {n_now} of {len(todo)} trials now, the rest as these end"
            if n_now
            else f"none of {len(todo)} trials can be submitted until some of those end"
        )
        say(
            f"[launch] slurm: {tightest.name} with {tightest.queued} job(s) already counted against it: {now}"
        )
    todo, held = list(todo[:n_now]), list(todo[n_now:])
    if not todo:
        return held
    chunks = array_chunks(len(todo), plan.cluster, submitter.max_array_size())
    after: str | None = None
    for n, chunk in enumerate(chunks):
        part = [todo[i] for i in chunk]
        try:
            line, after = submit_recorded(
                plan, part, submitter, mark=functools.partial(mark, part), call=call, throttle=throttle
            )
        except UserError as exc:
            if not n:
                raise
            raise UserError(
                f"{exc}; {chunk.start} of {len(todo)} trials were submitted (up to job {after}): "
                "re-run the same command to submit the rest"
            ) from None
        say(line)
    return held


def load_intents(output_dir: Path) -> list[tuple[Path, SubmissionIntent]]:
    out = []
    for path in sorted(intents_dir(output_dir).glob("*.json")):
        intent = load_record(path, SubmissionIntent)
        if isinstance(intent, Unreadable):
            raise UserError(f"{path}: unreadable submission record; move it away to continue")
        out.append((path, intent))
    return out


def reconcile(output_dir: Path, commands: Sequence[TrialCommand], submitter: Submitter) -> str | None:
    """Before submitting anything, find the arrays of earlier submissions by their job names: a live
    task whose trial still carries its submission's token is adopted (its job id is recorded); a task
    of a superseded submission, or a pending one whose trial is already final, has nothing to do and
    is cancelled before it holds an allocation. Returns the one line that says so (None: nothing live)."""
    intents = load_intents(output_dir)
    if not intents:
        return None
    tasks = submitter.live([intent.job_name for _, intent in intents])
    if tasks is None:
        raise UserError(
            "--backend slurm: squeue failed, so it is unknown which earlier arrays are still live; "
            "nothing was submitted; re-run when Slurm answers"
        )
    by_name = {intent.job_name: (path, intent) for path, intent in intents}
    by_id = {cmd.trial.trial_id: cmd for cmd in commands}
    adopted: dict[str, int] = {}
    orphans: list[str] = []
    for task in tasks:
        path, intent = by_name[task.name]
        if task.index >= len(intent.trial_ids):
            continue
        cmd = by_id.get(intent.trial_ids[task.index])
        if cmd is None:
            continue  # a trial this launch did not select: not ours to judge
        array = task.job_id.split("_")[0]
        if intent.array_id is None:
            intent = intent.model_copy(update={"array_id": array})
            write_model(path, intent)
            by_name[task.name] = (path, intent)
        status = read_status(cmd.trial.trial_dir, cmd.trial.trial_id)
        if status.token == intent.submission and status.state in FINAL and task.state != "PENDING":
            continue  # the trial's own job, finishing
        if status.token == intent.submission and status.state not in FINAL:
            record_job_id(
                cmd.trial.trial_dir, cmd.trial.trial_id, token=intent.submission, job_id=task.job_id
            )
            adopted[array] = adopted.get(array, 0) + 1
        else:
            orphans.append(task.job_id)
    if orphans:
        submitter.cancel(orphans)
    # An array whose launcher died before releasing it is still held (harmless for one that is not).
    submitter.release(sorted(adopted))
    if not (adopted or orphans):
        return None
    kept = ", ".join(f"{n} of array {a}" for a, n in sorted(adopted.items())) or "none"
    gone = f"cancelled {len(orphans)} orphan task(s) ({', '.join(orphans)})" if orphans else "no orphans"
    return f"[launch] slurm: reconciled with squeue: adopted live tasks {kept}; {gone}"


def cancel_sweep(output_dir: Path, submitter: Submitter) -> list[LiveTask]:
    """scancel every pending or running task of this output dir's submissions (found by their job
    names, which carry the submission id, so other sweeps of the same user are never touched), and
    record the cancel (slurm/cancelled.json) for a launcher that still watches it.
    Returns the tasks cancelled; a UserError when squeue cannot answer."""
    intents = load_intents(output_dir)
    if not intents:
        return []
    tasks = submitter.live([intent.job_name for _, intent in intents])
    if tasks is None:
        raise UserError("cancel: squeue failed, so the sweep's live jobs are unknown; nothing was cancelled")
    # Before scancel: a launcher watching the sweep stops submitting the trials a limit held back
    # (its next wave would have started the cancelled sweep again).
    write_model(
        layout.OutputFiles(output_dir).cancelled, SweepCancel(cancelled_at=utcnow(), tasks=len(tasks))
    )
    roots = sorted({t.job_id.split("_")[0] for t in tasks}, key=int)
    if roots:
        submitter.cancel(roots)  # whole arrays: one scancel, tasks not yet split off included
    return tasks
