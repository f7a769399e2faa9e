"""One concurrency limit across a sweep's arrays: the shares, the new arrays' `%` and dependency, and a
model of Slurm's array scheduling that runs split sweeps with and without a watching launcher.

Pure: no Slurm, no files.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from mle_world.launch.slurm.queries import SlurmView
from mle_world.launch.slurm.throttle import ArrayLoad, ArrayThrottle, ThrottleUpdate, array_loads, shares
from mle_world.records import TrialStatus


def status(job: str | None, state: str = "submitted", backend: str = "slurm") -> TrialStatus:
    array = job.split("_")[0] if job and "_" in job else None
    return TrialStatus.model_validate(
        {"trial_id": "t", "state": state, "backend": backend, "slurm_job_id": job, "slurm_array_id": array}
    )


def test_loads_count_live_tasks_per_array_in_submission_order() -> None:
    view = SlurmView(
        {"9_0": "RUNNING", "9_1": "PENDING", "10_0": "COMPLETED", "10_1": "PENDING"},
        squeue_ok=True,
        sacct_ok=True,
    )
    statuses = [
        status("10_0"),  # Slurm says it ended: not live, whatever its status says yet
        status("10_1"),
        status("10_2"),  # not listed yet: just submitted, counts as pending
        status("9_0", "running"),
        status("9_1"),
        status("9_2", "succeeded"),
        status(None, "pending"),
        status("7_0", "running", backend="local"),
        status("12"),  # a submission of one trial: a job of its own, no array
    ]
    assert array_loads(statuses, view) == [ArrayLoad("9", 2, 1), ArrayLoad("10", 2, 2), ArrayLoad("12", 1, 1)]


def test_shares_go_to_the_oldest_arrays_first() -> None:
    loads = [ArrayLoad("1", 1, 0), ArrayLoad("2", 5, 5), ArrayLoad("3", 5, 5)]
    assert shares(loads, 4) == {"1": 1, "2": 3, "3": 0}
    assert shares(loads, 20) == {"1": 1, "2": 5, "3": 5}


def test_a_new_array_takes_the_free_slots_or_waits_for_every_live_array() -> None:
    throttle = ArrayThrottle(4)
    assert throttle.next_array(3) == (3, None)
    throttle.submitted("11", 3, 3, None)
    assert throttle.next_array(5) == (1, None)  # one slot left: a share of 1, no wait
    throttle.submitted("12", 5, 1, None)
    assert throttle.next_array(5) == (4, "afterany:11:12")
    throttle.submitted("13", 5, 4, "afterany:11:12")
    assert throttle.updates() == []  # nothing drained yet; 13 keeps waiting
    # 11 is down to one live task: its two slots go to 12 (1 → 3); 13 still waits
    throttle.loads = [ArrayLoad("11", 1, 0), ArrayLoad("12", 5, 4), ArrayLoad("13", 5, 5)]
    assert throttle.updates() == [ThrottleUpdate("12", 3)]
    throttle.applied(ThrottleUpdate("12", 3))
    assert throttle.updates() == []
    # 11 ended, 12 has 2 live: 13 gets the other 2 slots and loses its dependency
    throttle.loads = [ArrayLoad("12", 2, 0), ArrayLoad("13", 5, 5)]
    assert throttle.updates() == [ThrottleUpdate("13", 2, clear_dependency=True)]
    throttle.applied(ThrottleUpdate("13", 2, clear_dependency=True))
    # 12 ended while 13 runs two: 13 gets all 4 slots, its throttle alone (no task runs with a
    # dependency left, and Slurm refuses `Dependency=` once one runs)
    throttle.loads = [ArrayLoad("13", 3, 1)]
    assert throttle.updates() == [ThrottleUpdate("13", 3)]


def test_the_dependency_is_cleared_only_while_the_array_may_still_wait_for_it() -> None:
    """A re-run launcher adopts arrays it did not submit: one whose tasks all pend may wait for its
    `afterany` (cleared with the throttle); one with a task started has no dependency left."""
    throttle = ArrayThrottle(4)
    throttle.loads = [ArrayLoad("21", 1, 0), ArrayLoad("22", 5, 5), ArrayLoad("23", 5, 4)]
    assert throttle.updates() == [ThrottleUpdate("22", 3, clear_dependency=True)]
    throttle.loads = [ArrayLoad("22", 2, 1), ArrayLoad("23", 5, 4)]
    assert throttle.updates() == [ThrottleUpdate("22", 2), ThrottleUpdate("23", 2)]


@dataclass
class Array:
    """An array as Slurm schedules it: tasks in index order, at most `limit` running, none before
    every array of `after` has ended."""

    array_id: str
    durations: list[float]
    limit: int
    after: list[str]
    next_task: int = 0
    running: dict[int, float] = field(default_factory=dict)  # task → end time
    done: int = 0

    @property
    def ended(self) -> bool:
        return self.done == len(self.durations)


def simulate(
    sizes: list[int], durations: list[float], parallelism: int, *, watching: bool
) -> tuple[int, float]:
    """Run a sweep split into arrays of `sizes` on a Slurm model (unlimited nodes), with the launcher
    rebalancing at every trial end (`watching`) or never (it died after submitting). Returns the
    most trials that ran at once and the makespan."""
    throttle = ArrayThrottle(parallelism)
    arrays: dict[str, Array] = {}
    start = 0
    for n, size in enumerate(sizes):
        limit, dependency = throttle.next_array(size)
        array_id = str(100 + n)
        after = dependency.split(":")[1:] if dependency else []
        arrays[array_id] = Array(array_id, durations[start : start + size], limit, after)
        throttle.submitted(array_id, size, limit, dependency)
        start += size
    now, most = 0.0, 0
    while not all(a.ended for a in arrays.values()):
        for a in arrays.values():  # Slurm starts what the throttles and dependencies allow
            while (
                a.next_task < len(a.durations)
                and len(a.running) < a.limit
                and all(arrays[b].ended for b in a.after)
            ):
                a.running[a.next_task] = now + a.durations[a.next_task]
                a.next_task += 1
        most = max(most, sum(len(a.running) for a in arrays.values()))
        now = min(end for a in arrays.values() for end in a.running.values())
        for a in arrays.values():
            for task, end in list(a.running.items()):
                if end <= now:
                    del a.running[task]
                    a.done += 1
        if watching:
            throttle.loads = [
                ArrayLoad(a.array_id, len(a.durations) - a.done, len(a.durations) - a.next_task)
                for a in arrays.values()
                if not a.ended
            ]
            for update in throttle.updates():
                arrays[update.array_id].limit = update.limit
                if update.clear_dependency:
                    arrays[update.array_id].after = []
                throttle.applied(update)
    return most, now


def pool_makespan(durations: list[float], parallelism: int) -> float:
    slots = [0.0] * parallelism
    for d in durations:
        slots.sort()
        slots[0] += d
    return max(slots)


def test_split_sweeps_never_exceed_the_limit_and_a_watched_one_runs_as_one_pool() -> None:
    """Random splits (MaxArraySize, submit-count waves) and trial lengths: at most `parallelism` trials
    run at once with or without the launcher; watched, the arrays hand slots on as one pool of
    `parallelism` slots would (the makespan of list scheduling in trial order)."""
    rng = random.Random(7)
    for _ in range(200):
        parallelism = rng.randint(1, 6)
        sizes = [rng.randint(1, 7) for _ in range(rng.randint(1, 5))]
        durations = [float(rng.randint(1, 9)) for _ in range(sum(sizes))]
        most, span = simulate(sizes, durations, parallelism, watching=True)
        assert most <= parallelism
        assert span == pool_makespan(durations, parallelism)
        unwatched_most, unwatched_span = simulate(sizes, durations, parallelism, watching=False)
        assert unwatched_most <= parallelism and unwatched_span >= span
