"""The sweep simulator: its speed at 3,570 trials (`--speed`), and its predictions against the real local
Slurm (simulated vs measured makespan).

`--speed` (no Slurm): `estimate` of ten times the paper's regime (30 seeds × 7 configurations × 17
tasks) as a process (CPU and wall), and in process its steps: the trial keys through `expand` (what
`estimate` did before: every trial's spec, paths and hash; the baseline) and through `planned_keys`,
and the simulation of four parallelism levels.

Reads the repository (tests/launch/launchkit.py builds the plans); writes trial dirs under
--work-dir (a temp dir by default) and prints a table. Two sweeps of short synthetic trials run as
submitit job arrays: the first (equal trials) calibrates the start-up (launch to the first trial's
start, from status.json: the array's submission and first scheduling, paid once) and then the
per-trial scheduler overhead, the
second (mixed lengths, more trials) is predicted from its planned trial lengths and from its
measured trial times, and compared with its measured makespan. Baseline in the same run: the
ideal makespan (no overhead), i.e. what a simulator without the calibrated overhead would say.

    flock /work/locks/slurm.lock python benchmarks/simulate.py [--parallelism 2]
    python benchmarks/simulate.py --speed
"""

from __future__ import annotations

import argparse
import re
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))

from launchkit import FAKE_AGENT, fast_cluster, make_plan  # noqa: E402

from mle_world.launch import run_sweep  # noqa: E402
from mle_world.launch.display import SilentDisplay  # noqa: E402
from mle_world.launch.launcher import SweepLauncher  # noqa: E402
from mle_world.launch.state import read_status  # noqa: E402
from mle_world.plan.config import load_paper_config  # noqa: E402
from mle_world.plan.estimate import estimate, makespan, measured_times, planned_keys, trial_key  # noqa: E402
from mle_world.plan.render import RuntimeSpec, view_paths  # noqa: E402
from mle_world.plan.sweep import Selection, expand  # noqa: E402
from mle_world.plan.sweep_plan import LaunchOptions, SweepPlan  # noqa: E402
from mle_world.records import LaunchedTrial  # noqa: E402
from mle_world.storage import write_model  # noqa: E402


def run(
    work: Path, name: str, seconds: list[float], parallelism: int, array_size: int | None = None
) -> tuple[SweepPlan, float, float]:
    """Run one sweep on the local Slurm (in arrays of `array_size`, slurm.max_array_tasks, when given):
    its plan (with launch.json written), measured makespan, and the start-up time (launch to the first
    trial's start, from status.json)."""
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
    span = time.monotonic() - t0
    if code != 0:
        raise SystemExit(f"{name}: sweep failed (exit {code})")
    starts = [read_status(r.trial.trial_dir, r.trial.trial_id).started_at for r in plan.commands]
    first = min(s.timestamp() for s in starts if s is not None)
    return plan, span, max(0.0, first - wall0)


def chained(
    durations: list[float], parallelism: int, size: int, overhead_s: float, startup_s: float
) -> float:
    """The makespan before one array_parallelism across arrays: each array of `size` started only once
    the whole previous one had ended (`afterany`)."""
    end = startup_s
    for i in range(0, len(durations), size):
        end = makespan(durations[i : i + size], parallelism, overhead_s=overhead_s, startup_s=end)
    return end


def calibrate(durations: list[float], parallelism: int, measured: float, startup_s: float) -> float:
    """The per-trial overhead that makes the simulated makespan (after `startup_s`) equal the measured
    one (bisection)."""
    lo, hi = 0.0, measured
    for _ in range(60):
        mid = (lo + hi) / 2
        if makespan(durations, parallelism, overhead_s=mid, startup_s=startup_s) < measured:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


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
    load = ", ".join(f"{x:.1f}" for x in __import__("os").getloadavg())
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
    ap.add_argument("--calibration", type=int, default=6, help="trials of the calibration sweep")
    ap.add_argument("--trials", type=int, default=12, help="trials of the checked sweeps")
    ap.add_argument("--array-size", type=int, default=5, help="slurm.max_array_tasks of the split sweep")
    ap.add_argument("--work-dir", type=Path, default=None)
    a = ap.parse_args()
    if a.speed:
        return speed()
    if shutil.which("sbatch") is None:
        print("skipped: no sbatch (run `bash scripts/slurm/local_cluster.sh up`)")
        return 0
    work = a.work_dir or Path(tempfile.mkdtemp(prefix="mlew-bench-simulate-"))
    p = a.parallelism
    try:
        calib_s = [3.0] * a.calibration
        calib_plan, calib_span, startup = run(work, "calibration", calib_s, p)
        overhead = calibrate(calib_s, p, calib_span, startup)
        # The same calibration for predictions from measured trial times (status.json start to end):
        # what remains per trial is the scheduler's gap between one trial's end and the next start.
        calib_times = measured_times(calib_plan.output_dir)
        calib_measured = [calib_times[trial_key(r.trial.trial_id)] for r in calib_plan.commands]
        gap = calibrate(calib_measured, p, calib_span, startup)
        mixed = [(1.0, 5.0, 2.0, 4.0, 3.0)[i % 5] for i in range(a.trials)]
        plan, span, _ = run(work, "checked", mixed, p)
        times = measured_times(plan.output_dir)
        measured_trials = [times[trial_key(r.trial.trial_id)] for r in plan.commands]
        rows = [
            ("ideal: planned lengths, no overhead (baseline)", makespan(mixed, p)),
            (
                "simulated: planned lengths + calibrated start-up and overhead",
                makespan(mixed, p, overhead_s=overhead, startup_s=startup),
            ),
            (
                "simulated: measured trial times + calibrated start-up and scheduler gap",
                makespan(measured_trials, p, overhead_s=gap, startup_s=startup),
            ),
        ]
        # The same trials split into arrays of --array-size (as a MaxArraySize would split them),
        # predicted as one pool of p slots: the arrays share one array_parallelism.
        split_plan, split_span, _ = run(work, "split", mixed, p, a.array_size)
        n_arrays = len(
            {read_status(r.trial.trial_dir, r.trial.trial_id).slurm_array_id for r in split_plan.commands}
        )
        split_times = measured_times(split_plan.output_dir)
        split_trials = [split_times[trial_key(r.trial.trial_id)] for r in split_plan.commands]
        # (the launcher polls every SweepLauncher.poll_s: fast_cluster's query_interval_s is 0)
        hand_on = SweepLauncher.poll_s / 2  # the mean wait for the watching launcher's next poll
        split_rows = [
            ("ideal: planned lengths, no overhead (baseline)", makespan(mixed, p)),
            (
                "simulated as one array: planned lengths + calibrated start-up and overhead",
                makespan(mixed, p, overhead_s=overhead, startup_s=startup),
            ),
            (
                f"simulated in arrays: planned lengths + start-up, overhead, {hand_on:g} s hand-on",
                makespan(
                    mixed,
                    p,
                    overhead_s=overhead,
                    startup_s=startup,
                    array_size=a.array_size,
                    handoff_s=hand_on,
                ),
            ),
            (
                f"simulated in arrays: measured trial times + start-up, gap, {hand_on:g} s hand-on",
                makespan(
                    split_trials,
                    p,
                    overhead_s=gap,
                    startup_s=startup,
                    array_size=a.array_size,
                    handoff_s=hand_on,
                ),
            ),
            (
                "arrays one after another (before), planned lengths + start-up and overhead",
                chained(mixed, p, a.array_size, overhead, startup),
            ),
        ]
    finally:
        if a.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)
    print(f"local Slurm, parallelism {p}; calibration: {a.calibration} × 3 s trials took {calib_span:.1f} s "
          f"→ start-up {startup:.2f} s (launch to the first trial's start), then "
          f"{overhead:.2f} s per trial beyond the planned length, "
          f"{gap:.2f} s beyond the measured trial time")  # fmt: skip
    print(
        f"checked sweep: {a.trials} trials of 1-5 s (sum {sum(mixed):.0f} s), measured makespan {span:.1f} s"
    )
    print()
    table(rows, span)
    print()
    print(
        f"split sweep: the same {a.trials} trials in {n_arrays} arrays of at most {a.array_size}, "
        f"measured makespan {split_span:.1f} s"
    )
    print()
    table(split_rows, split_span)
    return 0


def table(rows: list[tuple[str, float]], span: float) -> None:
    print("| prediction | makespan s | vs measured | error |")
    print("|---|---:|---:|---:|")
    for name, value in rows:
        print(f"| {name} | {value:.1f} | {value / span:.2f}x | {abs(value - span) / span:.1%} |")


if __name__ == "__main__":
    sys.exit(main())
