"""One `%` concurrency limit across a sweep's Slurm arrays: a sweep split into several arrays (MaxArraySize,
submit-count waves, re-runs) never runs more than `slurm.array_parallelism` trials at once, and hands a
slot an earlier array no longer needs to the next one.

Reads the trials' status records and Slurm's view of their jobs (both given by the caller); writes
nothing: the launcher submits with `next_array`'s limit and dependency and applies `updates` through
the `Submitter` (`scontrol update ArrayTaskThrottle=…`, `Dependency=`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from mle_world.launch.slurm.queries import ALIVE_STATES, SlurmView
from mle_world.records import TrialStatus


@dataclass(frozen=True)
class ArrayLoad:
    """An array of the sweep as Slurm last showed it."""

    array_id: str
    live: int
    """Tasks that may still run: pending, running (or not yet listed, right after submission)."""
    pending: int
    """Tasks that have not started: the only ones a new throttle or dependency still changes."""


@dataclass(frozen=True)
class ThrottleUpdate:
    """`scontrol update JobId=<array_id> ArrayTaskThrottle=<limit>` (and `Dependency=` when
    `clear_dependency`): the array may run `limit` tasks now, whatever array it waited for."""

    array_id: str
    limit: int
    clear_dependency: bool = False
    """The array may still wait for its `afterany`: none of its tasks has started and this launcher
    has not cleared it. Once a task of the array runs, Slurm answers `Dependency=` with exit 1 ("Job
    is no longer pending execution"), though it applies the throttle to the pending tasks: sent every
    time, the update looked failed and went again at every poll."""


def array_loads(statuses: Iterable[TrialStatus], view: SlurmView) -> list[ArrayLoad]:
    """The live arrays of these trials (Slurm's array order: submission order), from their status
    records and one Slurm view. A task Slurm does not list yet counts as pending: it was just
    submitted, or Slurm's tools are slow to show it."""
    live: dict[str, int] = {}
    pending: dict[str, int] = {}
    for status in statuses:
        if status.backend != "slurm" or status.state not in ("submitted", "running"):
            continue
        job = status.slurm_job_id
        if not job:
            continue
        array = status.slurm_array_id or job  # a submission of one trial is a job, not an array
        state = view.states.get(job)
        if state is not None and state not in ALIVE_STATES:
            continue
        live[array] = live.get(array, 0) + 1
        if state is None or state == "PENDING":
            pending[array] = pending.get(array, 0) + 1
    return [ArrayLoad(a, live[a], pending.get(a, 0)) for a in sorted(live, key=_array_order)]


def _array_order(array_id: str) -> tuple[int, str]:
    return (int(array_id), "") if array_id.isdigit() else (0, array_id)


def shares(loads: Iterable[ArrayLoad], parallelism: int) -> dict[str, int]:
    """Slots per array, handed out in array order: the oldest array keeps what its live tasks need
    and the next ones share what is left (never more than `parallelism` in all)."""
    left = parallelism
    out: dict[str, int] = {}
    for load in loads:
        out[load.array_id] = min(load.live, left)
        left -= out[load.array_id]
    return out


@dataclass
class ArrayThrottle:
    """The sweep's live arrays as last seen, and the throttle the launcher set on each.

    Safe without the launcher: an array submitted while the others fill every slot waits for all of
    them (`afterany`), with the whole parallelism; one given a share of the slots starts at once
    with that share as its `%`. Either way the arrays never run more than `parallelism` tasks at
    once, whatever happens to the launcher; a watching launcher only widens shares as arrays drain.
    """

    parallelism: int
    loads: list[ArrayLoad] = field(default_factory=list)
    set_limits: dict[str, int] = field(default_factory=dict)
    """Arrays this launcher submitted or updated: their `%` now, and no dependency left."""

    def observe(self, statuses: Iterable[TrialStatus], view: SlurmView) -> None:
        """Take the sweep's arrays from a new Slurm view (one the watchdog or the launcher made)."""
        if view.answered:
            self.loads = array_loads(statuses, view)

    def next_array(self, size: int) -> tuple[int, str | None]:
        """The `%` and the dependency (None or `afterany:A:B…`) of a new array of `size` tasks."""
        room = max(0, self.parallelism - sum(load.live for load in self.loads))
        if room:
            return min(size, room), None
        after = [load.array_id for load in self.loads if load.live]
        return min(size, self.parallelism), "afterany:" + ":".join(after)

    def submitted(self, array_id: str, size: int, limit: int, dependency: str | None) -> None:
        """Count a new array as live (all its tasks pending) until the next view shows it."""
        self.loads.append(ArrayLoad(array_id, size, size))
        if dependency is None:
            self.set_limits[array_id] = limit

    def updates(self) -> list[ThrottleUpdate]:
        """The throttles that hand freed slots to later arrays (in array order); `applied` records
        one once scontrol took it."""
        out = []
        given = shares(self.loads, self.parallelism)
        for load in self.loads:
            share = given[load.array_id]
            if not load.pending or not share:
                continue
            now = self.set_limits.get(load.array_id)
            # a `%` at or above the array's live tasks lets it run them all: the same as its share
            if now is None or min(now, load.live) != share:
                waits = now is None and load.pending == load.live
                out.append(ThrottleUpdate(load.array_id, share, clear_dependency=waits))
        return out

    def applied(self, update: ThrottleUpdate) -> None:
        self.set_limits[update.array_id] = update.limit

    def rebalance(self, apply: Callable[[ThrottleUpdate], bool], say: Callable[[str], None]) -> None:
        """Apply `updates` (`apply`: the Submitter's `throttle`, False when scontrol failed: tried
        again at the next poll) and say each."""
        for update in self.updates():
            if apply(update):
                self.applied(update)
                say(
                    f"[launch] slurm: job {update.array_id} may run {update.limit} trial(s) at once now "
                    f"(array_parallelism {self.parallelism} across the sweep's arrays)"
                )
