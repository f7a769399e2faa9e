"""Check the sweep simulator against the real local Slurm: simulated vs measured makespan.

Reads the repository (tests/launch/launchkit.py builds the plans); writes trial dirs under
--work-dir (a temp dir by default) and prints a table. Two sweeps of short synthetic trials run as
submitit job arrays: the first (equal trials) calibrates the start-up (launch to the first trial's
start, from status.json: the array's submission and first scheduling, paid once) and then the
per-trial scheduler overhead, the
second (mixed lengths, more trials) is predicted from its planned trial lengths and from its
measured trial times, and compared with its measured makespan. Baseline in the same run: the
ideal makespan (no overhead), i.e. what a simulator without the calibrated overhead would say.

    flock /work/locks/slurm.lock python benchmarks/simulate.py [--parallelism 2]
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))

from launchkit import FAKE_AGENT, fast_cluster, make_plan  # noqa: E402

from mle_world.launch import run_sweep  # noqa: E402
from mle_world.launch.display import SilentDisplay  # noqa: E402
from mle_world.launch.state import read_status  # noqa: E402
from mle_world.plan.estimate import makespan, measured_times, trial_key  # noqa: E402
from mle_world.plan.sweep_plan import LaunchOptions, SweepPlan  # noqa: E402
from mle_world.records import LaunchedTrial  # noqa: E402
from mle_world.storage import write_model  # noqa: E402


def run(work: Path, name: str, seconds: list[float], parallelism: int) -> tuple[SweepPlan, float, float]:
    """Run one sweep on the local Slurm: its plan (with launch.json written), measured makespan, and
    the start-up time (launch to the first trial's start, from status.json)."""
    out, data = work / name / "out", work / name / "data"
    plan = make_plan(out, data, len(seconds), cluster=fast_cluster(parallelism=parallelism))
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parallelism", type=int, default=2)
    ap.add_argument("--calibration", type=int, default=6, help="trials of the calibration sweep")
    ap.add_argument("--trials", type=int, default=12, help="trials of the checked sweep")
    ap.add_argument("--work-dir", type=Path, default=None)
    a = ap.parse_args()
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
    print("| prediction | makespan s | vs measured | error |")
    print("|---|---:|---:|---:|")
    for name, value in rows:
        print(f"| {name} | {value:.1f} | {value / span:.2f}x | {abs(value - span) / span:.1%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
