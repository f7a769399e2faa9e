"""What `status` tells about a sweep, bounded whatever its size: counts by configuration and state,
failures grouped by cause with a few examples, the longest-running trials, Slurm's pending reasons, time
used, an ETA simulated from measured trial times, and the exact next command (`next_command`).
`status --json` prints it.

Reads a `SweepStatus` (and, with costs, the cost CSVs); writes nothing.
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import datetime
from pathlib import Path

from mle_world import layout
from mle_world.launch.next_command import next_commands, read_launch_argv
from mle_world.launch.state import STATES
from mle_world.launch.sweep_state import SweepStatus, configuration_of
from mle_world.plan.estimate import makespan, measured_seconds, planned_times, trial_key
from mle_world.records import Record, TrialStatus

EXAMPLES = 3
"""Trial ids shown per failure cause."""
LONGEST = 5
"""Running trials shown (those running longest)."""
CAUSE_CHARS = 300
"""A cause is cut here: the agent's and servers' errors can be long."""

_VARYING = re.compile(r"0x[0-9a-fA-F]+|\b[0-9a-f]{8,}\b|\d+")


class _Model(Record):
    """The parts of `status --json`: immutable, unknown keys rejected."""


class FailureGroup(_Model):
    """Failed trials whose causes differ only in numbers (job ids, pids, steps, ports)."""

    failure_class: str | None
    cause: str
    """The first trial's cause, cut at CAUSE_CHARS (untrusted text: escape it before a terminal)."""
    trials: int
    examples: tuple[str, ...]


class FailedTrial(_Model):
    trial_id: str
    failure_class: str | None
    cause: str | None
    attempt: int
    requeues: int


class RunningTrial(_Model):
    trial_id: str
    host: str | None
    gpu: str | None
    elapsed_s: float
    """Wall time of the trial's attempt so far: earlier interrupted runs and the current one."""
    slurm_job_id: str | None
    attempt: int
    requeues: int
    preemptions: int


class Spend(_Model):
    """One role's usage so far, summed over the cost CSVs of the finished trials (`status --costs`)."""

    role: str
    trials: int
    prompt_tokens: int | None
    completion_tokens: int | None
    gpu_hours: float | None
    cost_usd: float | None
    """None when some trial's cost is unknown (a model without a price)."""
    trials_cost_unknown: int


class SweepSummary(_Model):
    """`run_paper.py status OUTPUT_DIR --json`: one object, the same facts as the terminal view."""

    output_dir: str
    updated_at: datetime
    trials: int
    counts: dict[str, int]
    """Trials per state (every state, zeros included)."""
    per_configuration: dict[str, dict[str, int]]
    failed_infra: int
    failed_agent: int
    failures: tuple[FailureGroup, ...]
    """Every cause, most trials first."""
    failed_trials: tuple[FailedTrial, ...]
    """Every failed trial (not shown on the terminal: `--json` is for scripts)."""
    running: int
    running_longest: tuple[RunningTrial, ...]
    pending_in_slurm: dict[str, int]
    """Slurm's reason → waiting tasks of this sweep."""
    launcher_alive: bool
    """A launcher holds the output dir's lock (it runs, or watches the Slurm jobs)."""
    launcher: str | None
    """That launcher's holder line (`pid N on HOST`)."""
    orphaned: tuple[str, ...]
    """Local trials marked submitted/running whose launcher is gone."""
    ended_jobs: tuple[str, ...]
    """Slurm jobs that ended without recording their trial's end (`12_3 CANCELLED`), no launcher watching."""
    unreadable: tuple[str, ...]
    """status.json files that could not be read, with the problem (their trials are in no count)."""
    launch_problem: str | None = None
    """Why launch.json gives no next command (unreadable, corrupt), None when it does."""
    stuck: int = 0
    """Unfinished trials that cannot progress without the sweep's command: orphaned, ended jobs and
    trials pending while no launcher runs."""
    trial_hours: float
    """Wall time used by every trial so far (finished attempts and running ones)."""
    gpu_hours: float
    """The same weighted by the GPUs each trial was given."""
    downtime_s: float
    downtime_trials: int
    requeues: int
    preemptions: int
    interrupted_trials: int
    eta_s: float | None
    """Seconds until every unfinished trial ends, simulated from the finished trials' times at the
    current parallelism; 0 when none is left; None when it cannot be told (no finished trial yet, or no
    launcher to run the local trials)."""
    parallelism: int
    """Slots the ETA assumes: the trials running now (at least 1)."""
    finished: bool
    """No trial is pending, submitted or running, or none of those can progress."""
    next_commands: tuple[str, ...]
    """What to run next, each a line: the sweep's own command with the flag it needs, or the audit."""
    spend: tuple[Spend, ...] | None = None
    """Per role (coder, feedback, world, execution), with `--costs`; None when not asked."""
    spend_unreadable: tuple[str, ...] = ()
    """Cost CSVs `--costs` could not read (left out of `spend`)."""
    slurm_unreachable: str | None = None
    """Why squeue did not answer this time (its wait is bounded): the counts are the trials' files alone,
    Slurm's pending reasons and ended jobs unknown. None when it answered or was not asked."""


def read_spend(output_dir: Path) -> tuple[tuple[Spend, ...], tuple[str, ...]]:
    """Every finished trial's cost CSV summed per role (costs/summary.csv is written only when a launch
    ends: during a sweep, or after `--no-wait`, it is stale), and the paths of CSVs it could not read.
    Reads `costs/*.csv`."""
    from mle_world.costs.summary import read_cost_rows, summarise_cost_rows

    costs_dir = layout.costs_dir(output_dir)
    rows, bad = read_cost_rows(costs_dir)
    groups = summarise_cost_rows({**row, "regime": "", "configuration": ""} for row in rows)
    return tuple(
        Spend(
            role=g.role,
            trials=g.trials,
            prompt_tokens=g.prompt_tokens,
            completion_tokens=g.completion_tokens,
            gpu_hours=g.gpu_hours,
            cost_usd=g.cost_usd,
            trials_cost_unknown=g.trials_cost_unknown,
        )
        for g in groups
    ), tuple(str(costs_dir / name) for name in bad)


def cause_key(failure_class: str | None, cause: str | None) -> str:
    """Causes differing only in job ids, pids, ports or step numbers fall into one group."""
    return f"{failure_class}|{_VARYING.sub('#', cause or '')[:CAUSE_CHARS]}"


def group_failures(failed: list[TrialStatus]) -> tuple[FailureGroup, ...]:
    groups: dict[str, list[TrialStatus]] = {}
    for t in failed:
        groups.setdefault(cause_key(t.failure_class, t.cause), []).append(t)
    ordered = sorted(groups.values(), key=lambda g: (-len(g), g[0].trial_id))
    return tuple(
        FailureGroup(
            failure_class=g[0].failure_class,
            cause=(g[0].cause or "(no cause recorded)")[:CAUSE_CHARS],
            trials=len(g),
            examples=tuple(t.trial_id for t in g[:EXAMPLES]),
        )
        for g in ordered
    )


def _elapsed(t: TrialStatus, now: datetime) -> float:
    """A running trial's attempt so far: runs ended before (wall_used_s) plus the current one."""
    current = (now - t.started_at).total_seconds() if t.started_at else 0.0
    return max(0.0, current) + t.wall_used_s


def _gpus(t: TrialStatus) -> int:
    return len([g for g in (t.gpu or "").split(",") if g.strip()])


def _task_of(key: str) -> str:
    """`configuration/task` of a `trial_key`, as `planned_times` groups it."""
    configuration, _, rest = key.partition("/")
    return f"{configuration}/{rest.rsplit('/', 1)[0]}"


def _planned(keys: list[str], measured: dict[str, float]) -> list[float]:
    """`planned_times` of `keys`, asked once per configuration and task rather than once per trial: an
    unmeasured trial's time is its configuration and task's mean (or coarser), the same for every seed.
    Asked per trial, those means were 0.6 s CPU of a 100,000-trial `status`."""
    tasks = [None if key in measured else _task_of(key) for key in keys]
    asked: dict[str, str] = {}
    for key, task in zip(keys, tasks, strict=True):
        if task is not None and task not in asked:
            asked[task] = key
    times = dict(zip(asked, planned_times(list(asked.values()), 0.0, measured), strict=True))
    return [measured[key] if task is None else times[task] for key, task in zip(keys, tasks, strict=True)]


def estimate_eta(trials: tuple[TrialStatus, ...], now: datetime) -> tuple[float | None, int]:
    """(seconds left, parallelism): the unfinished trials simulated by `plan.estimate.makespan` with the
    finished ones' times (the same trial's, else its configuration and task's, ..., as `estimate
    --measured`), each running trial holding a slot for what its time leaves, at the parallelism seen
    now (the trials running). None when nothing finished yet or nothing runs now."""
    measured: dict[str, float] = {}
    running: list[TrialStatus] = []
    waiting: list[TrialStatus] = []
    for t in trials:
        if t.state == "running":
            running.append(t)
        elif t.state in ("pending", "submitted"):
            waiting.append(t)
        else:
            seconds = measured_seconds(t)
            if seconds is not None:
                measured[trial_key(t.trial_id)] = seconds
    width = max(1, len(running))
    if not running and not waiting:
        return 0.0, width
    if not measured or not running:
        return None, width  # no times to go by, or no parallelism seen (all wait in the queue)
    planned = _planned([trial_key(t.trial_id) for t in (*running, *waiting)], measured)
    run_left, todo = planned[: len(running)], planned[len(running) :]
    busy = [max(0.0, left - _elapsed(t, now)) for t, left in zip(running, run_left, strict=True)]
    return makespan(todo, width, busy_s=busy), width


def summarise(output_dir: Path, sweep: SweepStatus, now: datetime, *, costs: bool = False) -> SweepSummary:
    """The bounded view of `sweep` at `now`; with `costs`, the spend so far from the cost CSVs too."""
    counts = sweep.counts()
    spend, spend_unreadable = read_spend(output_dir) if costs else (None, ())
    # One pass over the trials (each a few attribute reads): a pass per figure was 0.4 s CPU of a
    # 100,000-trial status.
    per_config: dict[str, Counter[str]] = {}
    for (name, state), n in Counter((configuration_of(t.trial_id), t.state) for t in sweep.trials).items():
        per_config.setdefault(name, Counter())[state] = n
    failed: list[TrialStatus] = []
    running_now: list[TrialStatus] = []
    interrupted: list[TrialStatus] = []
    rode_out: list[TrialStatus] = []
    gpus: dict[str | None, int] = {}
    hours = gpu_hours = 0.0
    for t in sweep.trials:
        if t.state == "running":
            running_now.append(t)
            seconds = _elapsed(t, now)
        else:
            seconds = t.wall_used_s
            if t.state == "failed":
                failed.append(t)
        if t.gpu not in gpus:
            gpus[t.gpu] = _gpus(t)
        hours += seconds / 3600.0
        gpu_hours += seconds * gpus[t.gpu] / 3600.0
        if t.requeues or t.preemptions:
            interrupted.append(t)
        if t.downtime_s > 0:
            rode_out.append(t)
    infra = sum(1 for t in failed if t.failure_class == "infra")
    running = sorted(running_now, key=lambda t: -_elapsed(t, now))
    orphaned = sweep.orphaned()
    eta, width = estimate_eta(sweep.trials, now)
    if orphaned:
        eta = None
    active = counts["pending"] + counts["submitted"] + counts["running"]
    launch = read_launch_argv(output_dir)
    return SweepSummary(
        output_dir=str(output_dir),
        updated_at=now,
        trials=len(sweep.trials),
        counts={s: counts[s] for s in STATES},
        per_configuration={name: {s: c[s] for s in STATES} for name, c in sorted(per_config.items())},
        failed_infra=infra,
        failed_agent=len(failed) - infra,
        failures=group_failures(failed),
        failed_trials=tuple(
            FailedTrial(
                trial_id=t.trial_id,
                failure_class=t.failure_class,
                cause=t.cause,
                attempt=t.attempt,
                requeues=t.requeues,
            )
            for t in failed
        ),
        running=len(running),
        running_longest=tuple(
            RunningTrial(
                trial_id=t.trial_id,
                host=t.host,
                gpu=t.gpu,
                elapsed_s=_elapsed(t, now),
                slurm_job_id=t.slurm_job_id,
                attempt=t.attempt,
                requeues=t.requeues,
                preemptions=t.preemptions,
            )
            for t in running[:LONGEST]
        ),
        pending_in_slurm=dict(sweep.pending),
        launcher_alive=sweep.launcher_alive,
        launcher=sweep.launcher or None,
        orphaned=tuple(t.trial_id for t in orphaned),
        ended_jobs=tuple(job for _, job in sweep.ended_jobs),
        unreadable=tuple(f"{path}: {problem}" for path, problem in sweep.unreadable),
        stuck=sweep.stuck(),
        launch_problem=launch.problem,
        trial_hours=hours,
        gpu_hours=gpu_hours,
        downtime_s=sum(t.downtime_s for t in rode_out),
        downtime_trials=len(rode_out),
        requeues=sum(t.requeues for t in interrupted),
        preemptions=sum(t.preemptions for t in interrupted),
        interrupted_trials=len(interrupted),
        eta_s=eta,
        parallelism=width,
        finished=(active == 0 or bool(orphaned) or active == sweep.stuck()) and not sweep.unreadable,
        next_commands=next_commands(output_dir, sweep, infra, len(failed) - infra, launch),
        spend=spend,
        spend_unreadable=spend_unreadable,
        slurm_unreachable=sweep.slurm_unreachable,
    )
