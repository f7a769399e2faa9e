"""Sweep simulator: expected makespan, GPU-hours and cost of a sweep before it runs.

Reads planned trials, cluster settings and, optionally, a finished sweep's `launch.json` and
`status.json` files (measured trial times); writes nothing.
"""

from __future__ import annotations

import heapq
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from mle_world import layout
from mle_world.errors import UserError
from mle_world.plan.config import PaperConfig
from mle_world.plan.sweep import Selection, resolve_selection
from mle_world.records import LaunchRecord, Regime, TrialStatus
from mle_world.storage import Unreadable, load_record


def makespan(
    durations: Sequence[float],
    parallelism: int,
    *,
    overhead_s: float = 0.0,
    startup_s: float = 0.0,
    busy_s: Sequence[float] = (),
    array_size: int | None = None,
    handoff_s: float = 0.0,
) -> float:
    """Wall time for trials started in order, each on the first free slot of `parallelism` slots.

    This is how a Slurm job array with `%parallelism` (and the local pool) hands out work: task i
    starts when a slot frees, in index order. `overhead_s` is the scheduler and launcher time a
    slot spends per trial besides the trial itself (submission, start, status bookkeeping);
    `startup_s` the time before the first trial starts (the array waiting in the queue, once).
    `busy_s`: slots already taken, each free after the seconds given (what is left of the trials
    running now: `status`'s ETA of a sweep under way); the other slots are free after `startup_s`.
    `array_size`: the sweep goes in arrays of that many trials sharing the slots (launch/slurm/
    throttle.py); a slot an array's trial frees goes to a later array's trial only when the watching
    launcher hands it on, `handoff_s` later (its next question to Slurm, its `scontrol update` and
    Slurm's next scheduling pass).
    """
    if parallelism < 1:
        raise ValueError(f"parallelism must be >= 1, got {parallelism}")
    if len(busy_s) > parallelism:
        raise ValueError(f"{len(busy_s)} busy slots exceed parallelism {parallelism}")
    if not durations:
        return max(busy_s, default=0.0)
    n_free = min(parallelism - len(busy_s), len(durations))
    # a heap of (free at, array of the trial that last ran there): the slots first given out go to
    # the first arrays without a hand-on (a new array takes the slots the live ones leave free)
    slots = [(b, -1) for b in sorted(busy_s)] + [(startup_s, -1)] * n_free
    heapq.heapify(slots)
    for i, seconds in enumerate(durations):
        free, last = heapq.heappop(slots)
        array = i // array_size if array_size else 0
        start = free + (handoff_s if last not in (-1, array) else 0.0)
        heapq.heappush(slots, (start + overhead_s + seconds, array))
    return max(end for end, _ in slots)


@dataclass(frozen=True)
class Estimate:
    """One simulated sweep."""

    parallelism: int
    trials: int
    makespan_s: float
    gpu_hours: float
    """GPU allocation: every trial holds its GPUs for its whole duration."""
    cost_usd: float | None
    utilisation: float
    """Trial time / (slots used × makespan after the start-up wait): how busy the slots are."""


def estimate(
    durations: Sequence[float],
    parallelism: int,
    *,
    gpus_per_trial: int,
    usd_per_gpu_hour: float | None,
    overhead_s: float = 0.0,
    startup_s: float = 0.0,
    array_size: int | None = None,
    handoff_s: float = 0.0,
) -> Estimate:
    """Makespan, GPU-hours and allocation cost of running `durations` with `parallelism` slots (in
    arrays of `array_size` handing slots on `handoff_s` late: see `makespan`)."""
    span = makespan(
        durations,
        parallelism,
        overhead_s=overhead_s,
        startup_s=startup_s,
        array_size=array_size,
        handoff_s=handoff_s,
    )
    busy = sum(durations)
    gpu_hours = busy * gpus_per_trial / 3600.0
    slots = min(parallelism, len(durations))
    return Estimate(
        parallelism=parallelism,
        trials=len(durations),
        makespan_s=span,
        gpu_hours=gpu_hours,
        cost_usd=gpu_hours * usd_per_gpu_hour if usd_per_gpu_hour is not None else None,
        # Slots exist once the array starts: the wait before it is not idle allocation.
        utilisation=busy / (slots * (span - startup_s)) if span > startup_s else 0.0,
    )


def with_savings(durations: Iterable[float], savings: float) -> list[float]:
    """Trial times shortened by the fraction `savings` (the gate's measured saving of trial time)."""
    if not 0.0 <= savings < 1.0:
        raise ValueError(f"savings must be in [0, 1), got {savings}")
    return [d * (1.0 - savings) for d in durations]


def planned_keys(
    config: PaperConfig, regime: Regime, selection: Selection, known_task: Callable[[str], bool]
) -> list[str]:
    """The `configuration/task/seedN` key of every trial a launch of this selection plans, in the
    launcher's order (configuration, task, seed: the job arrays' index order), checked as `expand`
    checks the selection, without building each trial's spec, paths and science hash (3,570 trials:
    0.7 s of `estimate`'s 1 s)."""
    if regime not in config.regimes:
        raise UserError(
            f"--regime: '{regime}' is not in {config.path}'s regimes ({', '.join(config.regimes)})"
        )
    configs, tasks, seeds = resolve_selection(config, selection, known_task)
    return [
        trial_key(layout.trial_id(regime, configuration, task, seed))
        for configuration in configs
        for task in tasks
        for seed in seeds
    ]


def trial_key(trial_id: str) -> str:
    """`configuration/task/seedN` of a trial id `regime/configuration/task/seedN` (pairs regimes)."""
    return trial_id.split("/", 1)[1] if trial_id.count("/") >= 3 else trial_id


def measured_times(output_dir: Path, regime: str | None = None, flag: str = "") -> dict[str, float]:
    """Seconds each finished trial of a sweep ran (`wall_used_s`: all its runs), by key.

    Reads `launch.json` for the trial list and each trial's `status.json`; unfinished trials are
    left out. Raises UserError when launch.json is missing or unreadable, or (given `regime`, the
    regime `flag` takes there) records a sweep of the other regime.
    """
    launch = layout.OutputFiles(output_dir).launch
    record = load_record(launch, LaunchRecord)
    if isinstance(record, Unreadable):
        raise UserError(f"{launch}: not a readable launch.json ({type(record.error).__name__})")
    if regime is not None and record.regime != regime:
        # Swapped dirs measured the gate as costing time, clamped to 0 % savings without a word.
        raise UserError(f"{flag} {output_dir}: a {record.regime} sweep (launch.json), where {regime} goes")
    times: dict[str, float] = {}
    for trial in record.trials:
        trial_dir = Path(trial.trial_dir)
        if not trial_dir.is_absolute():
            trial_dir = output_dir / trial_dir
        status = load_record(layout.TrialFiles(trial_dir).status, TrialStatus)
        if isinstance(status, Unreadable):  # unreadable, not UTF-8 or not a status: not a measured time
            continue
        seconds = measured_seconds(status)
        if seconds is not None:
            times[trial_key(trial.trial_id)] = seconds
    return times


def measured_seconds(status: TrialStatus) -> float | None:
    """What a finished trial took (`wall_used_s`: all its runs), None while it is not finished."""
    if status.state not in ("succeeded", "failed") or not (status.started_at and status.ended_at):
        return None
    # wall_used_s of a final trial already holds its last run (ended_at − started_at): not added.
    return max(0.0, status.wall_used_s)


def measured_savings(gated: Mapping[str, float], ungated: Mapping[str, float]) -> float:
    """1 − (gated time / ungated time) over the trials both sweeps finished (same config, task, seed).

    Raises UserError when the sweeps share no finished trial.
    """
    common = sorted(set(gated) & set(ungated))
    if not common:
        raise UserError("savings: the gated and ungated sweeps have no finished trial in common")
    total_ungated = sum(ungated[k] for k in common)
    if total_ungated <= 0:
        raise UserError("savings: the ungated sweep's common trials took no time")
    return max(0.0, 1.0 - sum(gated[k] for k in common) / total_ungated)


def planned_times(keys: Sequence[str], default_s: float, measured: Mapping[str, float] | None) -> list[float]:
    """A time per planned trial: measured when that trial ran, else the mean of the same configuration
    and task, else of the same configuration, else of everything measured; `default_s` without data.
    """
    if not measured:
        return [default_s] * len(keys)
    by_task: dict[str, list[float]] = {}
    by_config: dict[str, list[float]] = {}
    for key, seconds in measured.items():
        config, _, rest = key.partition("/")
        task = rest.rsplit("/", 1)[0]
        by_task.setdefault(f"{config}/{task}", []).append(seconds)
        by_config.setdefault(config, []).append(seconds)
    overall = statistics.fmean(measured.values())
    out = []
    for key in keys:
        config, _, rest = key.partition("/")
        task = rest.rsplit("/", 1)[0]
        if key in measured:
            out.append(measured[key])
        elif f"{config}/{task}" in by_task:
            out.append(statistics.fmean(by_task[f"{config}/{task}"]))
        elif config in by_config:
            out.append(statistics.fmean(by_config[config]))
        else:
            out.append(overall)
    return out


def parallelism_levels(array_parallelism: int, n_trials: int) -> list[int]:
    """The configured parallelism with a quarter, half and double of it (deduplicated, ≥ 1)."""
    levels = {
        max(1, array_parallelism // 4),
        max(1, array_parallelism // 2),
        array_parallelism,
        2 * array_parallelism,
    }
    return sorted(p for p in levels if p <= max(n_trials, array_parallelism))
