"""The Slurm watchdog: follows a sweep's trials until every one is final, and marks a trial failed/infra
only on positive evidence from Slurm that its job ended without a result.

Reads the trials' status.json and Slurm's view of their jobs (squeue/sacct through the `Submitter`);
writes a lost trial's status.json (`state.mark_failed_infra`).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Sequence

from mle_world.launch.slurm.backend import Submitter
from mle_world.launch.slurm.queries import ALIVE_STATES, POLL_S, SlurmView, ended_cause
from mle_world.launch.state import mark_failed_infra, read_status
from mle_world.plan.sweep_plan import TrialCommand
from mle_world.records import TrialStatus


def watch(
    commands: Sequence[TrialCommand],
    submitter: Submitter,
    *,
    say: Callable[[str], None],
    poll_s: float = POLL_S,
    lost_after_s: float = 120.0,
    query_interval_s: float = 0.0,
    refill: Callable[[], bool] | None = None,
    mem_gb: int = 0,
    progress: Callable[[int, int, int], None] | None = None,
    tend: Callable[[Sequence[TrialStatus], SlurmView], None] | None = None,
) -> None:
    """Wait until every trial is final. A job Slurm reports finished (twice in a row) while its status
    is not final died without a result (CANCELLED, NODE_FAIL, OOM, TIMEOUT) → failed/infra; so is a job
    that squeue and sacct both *answer* they do not know, for `lost_after_s` in a row. When both tools
    fail nothing is declared: it waits and says so. The status files are read every `poll_s`; Slurm is
    asked (one squeue and one sacct for the whole sweep) at most every `query_interval_s`, and then
    `refill` submits the next wave of trials an accounting limit held back (True while some wait).
    `progress` gets (finished, running, failed) after each read of the status files; `tend` the
    active trials' statuses and Slurm's answer about their jobs, each time Slurm answered (the
    launcher hands the slots of draining arrays to the next ones)."""
    suspicious: dict[str, int] = {}
    unknown_since: dict[str, float] = {}
    blind = False
    asked = -math.inf
    while True:
        active: list[tuple[TrialCommand, TrialStatus]] = []
        states: Counter[str] = Counter()
        for cmd in commands:
            status = read_status(cmd.trial.trial_dir, cmd.trial.trial_id)
            states[status.state] += 1
            if status.state in ("submitted", "running") and status.backend == "slurm":
                active.append((cmd, status))
        if progress is not None:
            progress(states["succeeded"] + states["failed"], states["running"], states["failed"])
        if not active and refill is None:
            return
        if time.monotonic() - asked < query_interval_s:
            time.sleep(poll_s)
            continue
        asked = time.monotonic()
        if refill is not None and not refill():
            refill = None
            continue  # the trials just submitted are active now
        if not active:
            time.sleep(poll_s)
            continue
        ids = [s.slurm_job_id for _, s in active if s.slurm_job_id]
        view = submitter.states(ids) if ids else SlurmView({}, squeue_ok=True, sacct_ok=True)
        if not view.answered:
            if not blind:
                say("[launch] slurm: squeue and sacct both fail; waiting (no job is declared lost)")
            blind = True
            unknown_since.clear()
            suspicious.clear()
            time.sleep(poll_s)
            continue
        if blind:
            say("[launch] slurm: squeue/sacct answer again; watching")
            blind = False
        if tend is not None:
            tend([s for _, s in active], view)
        for cmd, status in active:
            job = status.slurm_job_id
            key = cmd.trial.trial_id
            if not job:
                continue
            state = view.states.get(job)
            if state is None:
                suspicious.pop(key, None)
                if not view.known_gone(job):
                    unknown_since.pop(key, None)
                    continue
                first = unknown_since.setdefault(key, time.monotonic())
                if time.monotonic() - first > lost_after_s:
                    _lost(cmd, status, f"slurm job {job} unknown to squeue and sacct")
                continue
            unknown_since.pop(key, None)
            if state in ALIVE_STATES:
                suspicious.pop(key, None)
                continue
            # Seen finished twice in a row: the job's own last status write has had time to land.
            count = suspicious.get(key, 0) + 1
            suspicious[key] = count
            if count >= 2:
                _lost(cmd, status, ended_cause(job, state, mem_gb))
        time.sleep(poll_s)


def _lost(cmd: TrialCommand, status: TrialStatus, cause: str) -> None:
    # Fenced by the token the watchdog saw: a trial resubmitted meanwhile is not touched.
    mark_failed_infra(cmd.trial.trial_dir, cmd.trial.trial_id, token=status.token, cause=cause)
