"""The sweep simulator: its speed at 3,570 trials (`--speed`), and its predictions against the real local
Slurm (simulated vs measured makespan).

`--speed` (no Slurm): `estimate` of ten times the paper's regime (30 seeds × 7 configurations × 17
tasks) as a process (CPU and wall), and in process its steps: the trial keys through `expand` (what
`estimate` did before: every trial's spec, paths and hash; the baseline) and through `planned_keys`,
and the simulation of four parallelism levels.

Reads the repository (tests/support/launchkit.py builds the plans); writes trial dirs under
--work-dir (a temp dir by default) and prints tables. Without `--speed`, each of `--rounds` rounds
runs sweeps of the fake agent's short trials on the local Slurm, as submitit job arrays:
1. calibration: trials of 1-5 s in one array give the start-up (launch to the first trial's
   start, from status.json: paid once), then the per-trial overhead (`--overhead-s`); 1.5 × as many in
   arrays of 3 give the hand-on (`--handoff-s`: a slot going on to a later array waits for the
   watching launcher's poll, its `scontrol update` and Slurm's next scheduling pass);
2. the checked sweep (mixed 1-5 s trials) in one array, predicted from its planned lengths and
   from its measured trial times;
3. the same trials split into arrays of `--array-size`, predicted the same way.
The measured makespan is launch to the last trial's end (status.json), what `estimate` predicts.
Baseline in the same run: the ideal makespan (no overhead), what a simulator without the calibration
would say. The last table gives each round's error and their median.

    flock /work/locks/slurm.lock python benchmarks/simulate.py [--parallelism 2]
    python benchmarks/simulate.py --speed
"""

from __future__ import annotations

import argparse
import os
import random
import re
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))

from launchkit import FAKE_AGENT, fast_cluster, make_plan  # noqa: E402

from mle_world.launch import run_sweep  # noqa: E402
from mle_world.launch.display import SilentDisplay  # noqa: E402
from mle_world.launch.slurm.queries import query_period_s  # noqa: E402
from mle_world.launch.state import read_status  # noqa: E402
from mle_world.plan.config import load_paper_config  # noqa: E402
from mle_world.plan.estimate import estimate, makespan, measured_times, planned_keys, trial_key  # noqa: E402
from mle_world.plan.render import RuntimeSpec, view_paths  # noqa: E402
from mle_world.plan.sweep import Selection, expand  # noqa: E402
from mle_world.plan.sweep_plan import LaunchOptions, SweepPlan  # noqa: E402
from mle_world.records import LaunchedTrial  # noqa: E402
from mle_world.storage import write_model  # noqa: E402


@dataclass(frozen=True)
class Sweep:
    """One sweep run on the local Slurm, as its status.json files recorded it."""

    plan: SweepPlan
    makespan_s: float
    """Launch to the last trial's end: what `estimate` predicts."""
    returned_s: float
    """Launch to `run_sweep`'s return: the makespan and the watching launcher's last poll."""
    startup_s: float
    """Launch to the first trial's start."""
    times: list[float]
    """Each trial's measured time (status.json), in plan order."""
    arrays: int
    planned: list[float]
    """Each trial's planned length, in plan order."""
    array_size: int | None


def run(
    work: Path, name: str, seconds: list[float], parallelism: int, array_size: int | None = None
) -> Sweep:
    """Run one sweep of the fake agent's trials of `seconds` on the local Slurm (in arrays of
    `array_size`, slurm.max_array_tasks, when given)."""
    out, data = work / name / "out", work / name / "data"
    cluster = fast_cluster(parallelism=parallelism)
    if array_size is not None:
        cluster = cluster.model_copy(
            update={"slurm": cluster.slurm.model_copy(update={"max_array_tasks": array_size})}
        )
    plan = make_plan(out, data, len(seconds), cluster=cluster)
    commands = tuple(
        replace(r, command=" ".join(shlex.quote(a) for a in (sys.executable, str(FAKE_AGENT), "ok", str(s))))
        for r, s in zip(plan.commands, seconds, strict=True)
    )
    trials = tuple(
        LaunchedTrial(
            trial_id=r.trial.trial_id, science_hash="h", trial_dir=str(r.trial.trial_dir), command=r.command
        )
        for r in commands
    )
    plan = replace(
        plan, commands=commands, record=plan.record.model_copy(update={"trials": trials, "backend": "slurm"})
    )
    write_model(out / "launch.json", plan.record)
    gpus = tuple(str(i) for i in range(parallelism))
    options = LaunchOptions(backend="slurm", n_workers=parallelism, gpu_devices=gpus, show_progress=False)
    t0, wall0 = time.monotonic(), time.time()
    code = run_sweep(plan, options, display=SilentDisplay())
    returned = time.monotonic() - t0
    if code != 0:
        raise SystemExit(f"{name}: sweep failed (exit {code})")
    statuses = [read_status(r.trial.trial_dir, r.trial.trial_id) for r in plan.commands]
    starts = [s.started_at.timestamp() for s in statuses if s.started_at is not None]
    ends = [s.ended_at.timestamp() for s in statuses if s.ended_at is not None]
    times = measured_times(plan.output_dir)
    return Sweep(
        plan=plan,
        makespan_s=max(ends) - wall0,
        returned_s=returned,
        startup_s=max(0.0, min(starts) - wall0),
        times=[times[trial_key(r.trial.trial_id)] for r in plan.commands],
        arrays=len({s.slurm_array_id for s in statuses}),
        planned=seconds,
        array_size=array_size,
    )


def chained(
    durations: list[float], parallelism: int, size: int, overhead_s: float, startup_s: float
) -> float:
    """The makespan before one array_parallelism across arrays: each array of `size` started only once
    the whole previous one had ended (`afterany`)."""
    end = startup_s
    for i in range(0, len(durations), size):
        end = makespan(durations[i : i + size], parallelism, overhead_s=overhead_s, startup_s=end)
    return end


def fit(simulate: Callable[[float], float], measured: float) -> float:
    """The x ≥ 0 for which `simulate(x)` (non-decreasing) equals `measured` (bisection; 0 when even
    x = 0 simulates more)."""
    lo, hi = 0.0, measured
    for _ in range(60):
        mid = (lo + hi) / 2
        if simulate(mid) < measured:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


@dataclass(frozen=True)
class Calibration:
    """`estimate`'s flags as calibration sweeps (never the checked ones) measured them."""

    startup_s: float
    """--startup-s: the mean of the sweeps' launch to first start."""
    overhead_s: float
    """--overhead-s: per trial beyond its planned length (the one-array sweeps)."""
    gap_s: float
    """The same beyond each trial's measured time: the scheduler's gap between one trial's end and
    the next start (for predictions from measured times)."""
    handoff_s: float
    """--handoff-s: a slot's extra wait when it goes on to a later array (the split sweeps)."""

    def flags(self) -> str:
        return f"--startup-s {self.startup_s:.2f} --overhead-s {self.overhead_s:.2f} --handoff-s {self.handoff_s:.2f}"


def calibration(ones: list[Sweep], splits: list[Sweep], p: int) -> Calibration:
    """Fit the overhead and gap to the one-array sweeps and then the hand-on to the split ones, each
    so that the simulated makespans (with each sweep's own start-up) add up to the measured ones."""
    overhead = fit(
        lambda x: sum(makespan(s.planned, p, overhead_s=x, startup_s=s.startup_s) for s in ones),
        sum(s.makespan_s for s in ones),
    )
    gap = fit(
        lambda x: sum(makespan(s.times, p, overhead_s=x, startup_s=s.startup_s) for s in ones),
        sum(s.makespan_s for s in ones),
    )
    handoff = fit(
        lambda x: sum(
            makespan(
                s.planned, p, overhead_s=overhead, startup_s=s.startup_s, array_size=s.array_size, handoff_s=x
            )
            for s in splits
        ),
        sum(s.makespan_s for s in splits),
    )
    startups = [s.startup_s for s in (*ones, *splits)]
    return Calibration(sum(startups) / len(startups), overhead, gap, handoff)


def lengths(n: int, seed: int) -> list[float]:
    """`n` trial lengths of 1-5 s, drawn (with `seed`) to the hundredth of a second.

    Not whole seconds: Slurm starts a freed slot's next task at its next scheduling pass (every 2 s
    on the local cluster, `sched_interval` and `bf_interval`), so trials of whole seconds end at the
    same phase of those passes, sweep after sweep. Calibrated on 2, 4 and 3 s trials the overhead
    came out 0.68-0.70 s a trial where 1-5 s trials took 1.1-1.2 s: every prediction 4-11 % short.
    Real trials end at any phase; so do these."""
    rng = random.Random(seed)
    return [round(rng.uniform(1.0, 5.0), 2) for _ in range(n)]


def calibrate(work: Path, parallelism: int, trials: int, seed: int) -> tuple[Sweep, Sweep]:
    """Run `trials` trials of 1-5 s as one array (start-up, overhead and gap) and 1.5 × as many in
    arrays of 3 (hand-on: the launcher's poll, its scontrol update and Slurm's next pass)."""
    one = run(work, "calibration", lengths(trials, seed + 1), parallelism)
    split = run(work, "calibration-split", lengths(trials * 3 // 2, seed + 2), parallelism, 3)
    return one, split


REPO = Path(__file__).resolve().parents[1]


def ten_times_config(work: Path) -> Path:
    """configs/paper.yaml with 30 seeds: 7 × 17 × 30 = 3,570 trials a regime (its tasks.txt beside it)."""
    text = (REPO / "configs" / "paper.yaml").read_text()
    seeds = "seeds: [" + ", ".join(str(s) for s in range(34, 64)) + "]"
    (work / "paper.yaml").write_text(re.sub(r"^seeds:.*$", seeds, text, count=1, flags=re.M))
    shutil.copy(REPO / "configs" / "tasks.txt", work / "tasks.txt")
    return work / "paper.yaml"


def cpu_ms(fn: object, repeats: int = 5) -> float:
    """The median CPU milliseconds of `fn()` in this process."""
    times = []
    for _ in range(repeats):
        t0 = time.process_time()
        fn()  # type: ignore[operator]
        times.append((time.process_time() - t0) * 1000)
    return sorted(times)[len(times) // 2]


def speed() -> int:
    from mle_world.tasks.registry import load_registry

    with tempfile.TemporaryDirectory(prefix="mlew-bench-estimate-") as tmp:
        path = ten_times_config(Path(tmp))
        registry = load_registry()
        config = load_paper_config(path, registry.__contains__)
        runtime = RuntimeSpec("process", python=sys.executable)
        n = len(planned_keys(config, "gated", Selection(), registry.__contains__))

        def by_expand() -> list[str]:
            trials = expand(
                config, "gated", Selection(), output_dir=Path("/o"), data_dir=Path("/d"),
                known_task=registry.__contains__, view=lambda d, p: view_paths(runtime, d, p),
            )  # fmt: skip
            return [trial_key(t.trial_id) for t in trials]

        def simulate() -> None:
            for level in (8, 16, 32, 64):
                estimate([45000.0] * n, level, gpus_per_trial=1, usd_per_gpu_hour=2.5)

        before = cpu_ms(by_expand)
        after = cpu_ms(lambda: planned_keys(config, "gated", Selection(), registry.__contains__))
        sim = cpu_ms(simulate)
        runs = []
        for _ in range(3):
            usage0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.monotonic()
            subprocess.run(
                [sys.executable, str(REPO / "run_paper.py"), "estimate", "--regime", "gated", "--config", str(path)],
                check=True, capture_output=True,
            )  # fmt: skip
            usage = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = usage.ru_utime - usage0.ru_utime + usage.ru_stime - usage0.ru_stime
            runs.append((cpu, time.monotonic() - t0))
        cpu, wall = sorted(runs)[1]
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"estimate of {n} trials (configs/paper.yaml with 30 seeds), load average {load}")
    print()
    print("| step | CPU ms | vs keys through expand |")
    print("|---|---:|---:|")
    print(f"| trial keys through expand (what estimate did; baseline) | {before:.0f} | 1.00x |")
    print(f"| trial keys through planned_keys | {after:.0f} | {after / before:.2f}x |")
    print(f"| simulation, 4 parallelism levels | {sim:.0f} | {sim / before:.2f}x |")
    print(f"| `run_paper.py estimate` process (median of 3) | {cpu * 1000:.0f} (wall {wall * 1000:.0f}) | "
          f"{cpu * 1000 / before:.2f}x |")  # fmt: skip
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--speed", action="store_true", help="time estimate at 3,570 trials (no Slurm)")
    ap.add_argument("--parallelism", type=int, default=2)
    ap.add_argument("--calibration", type=int, default=8, help="trials of the one-array calibration sweep")
    ap.add_argument("--trials", type=int, default=12, help="trials of the checked sweeps")
    ap.add_argument("--array-size", type=int, default=5, help="slurm.max_array_tasks of the split sweep")
    ap.add_argument("--rounds", type=int, default=5, help="calibrate and predict this many times")
    ap.add_argument("--work-dir", type=Path, default=None)
    a = ap.parse_args()
    if a.speed:
        return speed()
    if shutil.which("sbatch") is None:
        print("skipped: no sbatch (run `bash scripts/slurm/local_cluster.sh up`)")
        return 0
    work = a.work_dir or Path(tempfile.mkdtemp(prefix="mlew-bench-simulate-"))
    p = a.parallelism
    rounds: list[Round] = []
    try:
        for n in range(1, a.rounds + 1):
            rounds.append(one_round(work / f"round{n}", n, a))
    finally:
        if a.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)
    pooled = calibration([r.one for r in rounds], [r.split_cal for r in rounds], p)
    print(f"## Errors of the predictions from planned lengths over {len(rounds)} round(s)")
    print()
    print(
        "Each round's own calibration, and all rounds' calibration sweeps pooled (`estimate "
        f"{pooled.flags()}`: a cluster calibrated once, with more than one sample)."
    )
    print()
    print("| checked sweep, calibration | each round | median |")
    print("|---|---|---:|")
    for name, values in (
        ("one array, the round's", [r.error(r.calibration, p) for r in rounds]),
        (f"arrays of at most {a.array_size}, the round's", [r.error(r.calibration, p, split=True) for r in rounds]),
        ("one array, pooled", [r.error(pooled, p) for r in rounds]),
        (f"arrays of at most {a.array_size}, pooled", [r.error(pooled, p, split=True) for r in rounds]),
    ):  # fmt: skip
        print(f"| {name} | {', '.join(f'{v:+.1%}' for v in values)} | {median(values):+.1%} |")
    return 0


def median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


@dataclass(frozen=True)
class Round:
    """A round's sweeps: two to calibrate, two to check."""

    one: Sweep
    split_cal: Sweep
    checked: Sweep
    split: Sweep
    calibration: Calibration

    def error(self, cal: Calibration, p: int, *, split: bool = False) -> float:
        """The signed error of the prediction from planned lengths with `cal`."""
        sweep = self.split if split else self.checked
        predicted = makespan(
            sweep.planned, p, overhead_s=cal.overhead_s, startup_s=cal.startup_s,
            array_size=sweep.array_size, handoff_s=cal.handoff_s,
        )  # fmt: skip
        return predicted / sweep.makespan_s - 1


def one_round(work: Path, n: int, a: argparse.Namespace) -> Round:
    """Calibrate, then run the checked sweeps and print their predictions."""
    p = a.parallelism
    # Each round draws its own lengths: the calibration's are never the checked sweeps'.
    one, split_cal = calibrate(work, p, a.calibration, seed=10 * n)
    cal = calibration([one], [split_cal], p)
    mixed = lengths(a.trials, seed=10 * n)
    checked = run(work, "checked", mixed, p)
    rows = [
        ("ideal: planned lengths, no overhead (baseline)", makespan(mixed, p)),
        (
            "simulated: planned lengths + calibrated start-up and overhead",
            makespan(mixed, p, overhead_s=cal.overhead_s, startup_s=cal.startup_s),
        ),
        (
            "simulated: measured trial times + calibrated start-up and scheduler gap",
            makespan(checked.times, p, overhead_s=cal.gap_s, startup_s=cal.startup_s),
        ),
    ]
    # The same trials split into arrays of --array-size (as a MaxArraySize would split them): one
    # pool of p slots (the arrays share one array_parallelism), a slot handed on between arrays late.
    split = run(work, "split", mixed, p, a.array_size)

    def in_arrays(durations: list[float], overhead_s: float) -> float:
        return makespan(
            durations, p, overhead_s=overhead_s, startup_s=cal.startup_s,
            array_size=a.array_size, handoff_s=cal.handoff_s,
        )  # fmt: skip

    split_rows = [
        ("ideal: planned lengths, no overhead (baseline)", makespan(mixed, p)),
        (
            "simulated as one array: planned lengths + calibrated start-up and overhead",
            makespan(mixed, p, overhead_s=cal.overhead_s, startup_s=cal.startup_s),
        ),
        (
            "simulated in arrays: planned lengths + calibrated start-up, overhead and hand-on",
            in_arrays(mixed, cal.overhead_s),
        ),
        (
            "simulated in arrays: measured trial times + calibrated start-up, gap and hand-on",
            in_arrays(split.times, cal.gap_s),
        ),
        (
            f"simulated in arrays: planned lengths + start-up, overhead, half-poll hand-on "
            f"({query_period_s(0) / 2:g} s: estimate's default at query_interval_s 0)",
            makespan(
                mixed,
                p,
                overhead_s=cal.overhead_s,
                startup_s=cal.startup_s,
                array_size=a.array_size,
                handoff_s=query_period_s(0) / 2,
            ),
        ),  # fmt: skip
        (
            "arrays one after another (before), planned lengths + start-up and overhead",
            chained(mixed, p, a.array_size, cal.overhead_s, cal.startup_s),
        ),
    ]
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"## Round {n} (local Slurm, parallelism {p}, load average {load})")
    print()
    print(
        f"calibration: {a.calibration} trials of 1-5 s in one array took {one.makespan_s:.1f} s, "
        f"{len(split_cal.times)} in arrays of 3 took {split_cal.makespan_s:.1f} s (launch to the last "
        f"end) → `estimate {cal.flags()}`; {cal.gap_s:.2f} s per trial beyond the measured trial time"
    )
    print(
        f"checked sweep: {a.trials} trials of 1-5 s (sum {sum(mixed):.0f} s), measured makespan "
        f"{checked.makespan_s:.1f} s (the watching launcher returned at {checked.returned_s:.1f} s)"
    )
    print()
    table(rows, checked.makespan_s)
    print()
    print(
        f"split sweep: the same {a.trials} trials in {split.arrays} arrays of at most {a.array_size}, "
        f"measured makespan {split.makespan_s:.1f} s (returned at {split.returned_s:.1f} s)"
    )
    print()
    table(split_rows, split.makespan_s)
    print(flush=True)
    return Round(one, split_cal, checked, split, cal)


def table(rows: list[tuple[str, float]], span: float) -> None:
    print("| prediction | makespan s | vs measured | error |")
    print("|---|---:|---:|---:|")
    for name, value in rows:
        print(f"| {name} | {value:.1f} | {value / span:.2f}x | {value / span - 1:+.1%} |")


if __name__ == "__main__":
    sys.exit(main())
