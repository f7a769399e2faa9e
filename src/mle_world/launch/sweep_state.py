"""A sweep's state as its files and Slurm say it: every trial's status.json, the launcher's lock, and what
squeue/sacct report about trials no launcher watches.

Reads `runs/*/*/status.json`, `.launcher.lock` (its holder line) and asks one squeue (its time bounded),
and sacct only about jobs squeue no longer lists; writes nothing.
"""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from mle_world import layout
from mle_world.collector import collector_paused
from mle_world.errors import UserError
from mle_world.launch.liveness import launcher_alive
from mle_world.records import TrialStatus
from mle_world.storage import Unreadable, load_record


@dataclass(frozen=True)
class SweepStatus:
    trials: tuple[TrialStatus, ...]
    unreadable: tuple[tuple[Path, str], ...]
    """status.json files that could not be read, with the problem."""
    launcher_alive: bool = True
    """False when no launcher holds the output dir's lock (a local sweep's trials cannot be progressing)."""
    ended_jobs: tuple[tuple[str, str], ...] = ()
    """(trial id, "12_3 CANCELLED"): Slurm trials still marked submitted/running whose job Slurm says
    ended, with no launcher watching to record it (`ask_slurm`)."""
    pending: tuple[tuple[str, int], ...] = ()
    """Slurm's reasons for the sweep's pending tasks, most tasks first (`ask_slurm`)."""
    launcher: str = ""
    """The live launcher's holder line (`pid 123 on host`), empty when none runs."""
    slurm_unreachable: str | None = None
    """Why squeue did not answer (the view is then the files' alone), None when it did or was not asked."""

    def orphaned(self) -> list[TrialStatus]:
        """Local trials still marked submitted/running although their launcher is gone."""
        return list(self._orphaned)

    def unstarted(self) -> list[TrialStatus]:
        """Trials still pending although no launcher runs (one stopped by Ctrl-C, or `--no-wait` that
        left some unsubmitted): nothing starts them until the sweep's command runs again."""
        return list(self._unstarted)

    # Found once: the summary and its next command ask a few times each (a pass over every trial).
    @cached_property
    def _orphaned(self) -> tuple[TrialStatus, ...]:
        if self.launcher_alive:
            return ()
        return tuple(t for t in self.trials if t.state in ("submitted", "running") and t.backend == "local")

    @cached_property
    def _unstarted(self) -> tuple[TrialStatus, ...]:
        if self.launcher_alive:
            return ()
        return tuple(t for t in self.trials if t.state == "pending")

    def stuck(self) -> int:
        """Unfinished trials that cannot progress: orphaned local ones, ended Slurm jobs, unstarted ones."""
        return len(self.orphaned()) + len(self.ended_jobs) + len(self.unstarted())

    def counts(self) -> Counter[str]:
        return Counter(t.state for t in self.trials)


def configuration_of(trial_id: str) -> str:
    parts = trial_id.split("/")
    return parts[1] if len(parts) >= 4 else "?"


OUTPUT_DIR_MARKERS = (layout.LAUNCH, layout.SWEEP_IDENTITY)
"""Files only a launch writes: the CLI's record, or the launcher's identity of the sweep."""


def is_output_dir(path: Path) -> bool:
    """A directory some launch (dry or real) has written to."""
    return any((path / name).is_file() for name in OUTPUT_DIR_MARKERS)


@dataclass(frozen=True)
class SlurmFacts:
    """What Slurm said of a sweep's unfinished trials in one poll (`ask_slurm`)."""

    ended: tuple[tuple[str, str], ...] = ()
    pending: tuple[tuple[str, int], ...] = ()
    unreachable: str | None = None
    """Why squeue gave no answer (a controller down or too slow); None when it answered or was not asked."""


def ask_slurm(trials: Sequence[tuple[str | Path, TrialStatus]], launcher_alive: bool) -> SlurmFacts:
    """One squeue for every array of the Slurm trials marked submitted/running, killed after
    `queries.QUEUE_TIMEOUT_S`; nothing more is asked when it cannot answer (the view stays the files').
    From it: why the submitted trials' tasks wait (Priority, Resources, JobArrayTaskLimit, ...), and,
    when no launcher watches, which trials' jobs ended (CANCELLED, NODE_FAIL, TIMEOUT, ...) without
    their status.json saying so after Slurm answered (a job records its own end before it ends): sacct,
    asked only about the arrays of jobs squeue no longer lists. Only a watching launcher records such an
    end; without one, `status` said 'running' for ever and `status --watch` never returned. Two squeue
    calls (states, then reasons) took 18 s each against a controller that was down."""
    active = [
        (path, t)
        for path, t in trials
        if t.state in ("submitted", "running") and t.backend == "slurm" and t.slurm_job_id
    ]
    if not active or shutil.which("squeue") is None:
        return SlurmFacts()
    # Here, not at the top: the Slurm backend (and the planner it imports) is 0.07 s CPU that
    # `audit` and `status` of a local sweep do not need (they import this module for is_output_dir).
    from mle_world.launch.slurm.queries import ALIVE_STATES, query_accounting, query_queue

    queue = query_queue([t.slurm_job_id or "" for _, t in active])
    if queue.problem is not None:
        return SlurmFacts(unreachable=queue.problem)
    waiting = {(t.slurm_job_id or "").split("_")[0] for _, t in active if t.state == "submitted"}
    pending = tuple(queue.pending_reasons(waiting).most_common())
    gone = [(path, t) for path, t in active if t.slurm_job_id not in queue.tasks]
    if launcher_alive or not gone or shutil.which("sacct") is None:
        return SlurmFacts(pending=pending)
    states = query_accounting([t.slurm_job_id or "" for _, t in gone]) or {}
    ended: list[tuple[str, str]] = []
    for path, status in gone:
        state = states.get(status.slurm_job_id or "")
        if state is None or state in ALIVE_STATES:
            continue
        now = load_record(path, TrialStatus)
        if isinstance(now, Unreadable):
            continue
        if now.state in ("submitted", "running") and now.slurm_job_id == status.slurm_job_id:
            ended.append((status.trial_id, f"{status.slurm_job_id} {state}"))
    return SlurmFacts(tuple(ended), pending)


def _holder(output_dir: Path) -> str:
    try:
        return (output_dir / layout.LAUNCHER_LOCK).read_text(encoding="utf-8", errors="replace").strip()[:200]
    except OSError:
        return ""


def read_sweep_status(output_dir: Path) -> SweepStatus:
    """Every trial's status.json under an output dir of run_paper.py (else a UserError)."""
    if not output_dir.is_dir():
        raise UserError(f"{output_dir}: no such output dir")
    if not is_output_dir(output_dir):
        raise UserError(f"{output_dir}: not an output dir of run_paper.py (no launch.json)")
    trials: list[tuple[str, TrialStatus]] = []
    bad: list[tuple[Path, str]] = []
    with collector_paused():
        for path in layout.status_candidates(output_dir):
            got = load_record(path, TrialStatus)
            if not isinstance(got, Unreadable):
                trials.append((path, got))
            elif not got.missing:  # a trial dir without a status (yet) is no problem
                bad.append((Path(path), got.detail))
    alive = launcher_alive(output_dir)
    slurm = ask_slurm(trials, alive)  # a watching launcher records ended jobs itself
    return SweepStatus(
        tuple(t for _, t in trials),
        tuple(bad),
        launcher_alive=alive,
        ended_jobs=slurm.ended,
        pending=slurm.pending,
        launcher=_holder(output_dir) if alive else "",
        slurm_unreachable=slurm.unreachable,
    )
