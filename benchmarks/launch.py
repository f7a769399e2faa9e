"""Launcher overhead: N short trials on the local pool and on the local Slurm (submitit job array).

Reads nothing but the repository (tests/support/launchkit.py builds the plan); writes trial dirs under
--work-dir (a temp dir by default) and prints, per backend, makespan / ideal makespan
(N × trial time / parallelism) and harness overhead per trial; `--json PATH` also saves the numbers.

    python benchmarks/launch.py --n 12 --seconds 3 --parallelism 2 --backends local,slurm
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))  # the tests' helpers

from launchkit import fast_cluster, make_plan  # noqa: E402

from mle_world.launch import run_sweep  # noqa: E402
from mle_world.launch.display import SilentDisplay  # noqa: E402
from mle_world.launch.state import read_status  # noqa: E402
from mle_world.plan.sweep_plan import LaunchOptions  # noqa: E402


def bench(backend: str, work: Path, n: int, seconds: float, parallelism: int) -> dict[str, float | int | str]:
    out, data = work / backend / "out", work / backend / "data"
    plan = make_plan(out, data, n, seconds=seconds, cluster=fast_cluster(parallelism=parallelism))
    gpus = tuple(str(i) for i in range(parallelism))
    options = LaunchOptions(backend=backend, n_workers=parallelism, gpu_devices=gpus, show_progress=False)
    t0 = time.monotonic()
    code = run_sweep(plan, options, display=SilentDisplay())
    makespan = time.monotonic() - t0
    statuses = [read_status(r.trial.trial_dir, r.trial.trial_id) for r in plan.commands]
    if code != 0:
        raise SystemExit(f"{backend}: sweep failed (exit {code}): {[s.cause for s in statuses if s.cause]}")
    in_job = [
        (s.ended_at - s.started_at).total_seconds() - seconds for s in statuses if s.started_at and s.ended_at
    ]
    ideal = n * seconds / parallelism
    return {
        "backend": backend,
        "trials": n,
        "trial_s": seconds,
        "parallelism": parallelism,
        "makespan_s": round(makespan, 2),
        "ideal_s": round(ideal, 2),
        "ratio": round(makespan / ideal, 3),
        # makespan beyond the ideal, spread over the trials each slot ran: launcher + scheduler cost
        "overhead_per_trial_s": round((makespan - ideal) * parallelism / n, 3),
        # the part of it spent between 'running' and the final status (process start, classification)
        "in_job_overhead_s": round(sum(in_job) / len(in_job), 3),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=12)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--parallelism", type=int, default=2)
    ap.add_argument("--backends", default="local,slurm")
    ap.add_argument("--work-dir", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()
    work = a.work_dir or Path(tempfile.mkdtemp(prefix="mlew-bench-launch-"))
    rows = []
    for backend in a.backends.split(","):
        if backend == "slurm" and shutil.which("sbatch") is None:
            print("slurm: skipped (no sbatch; run `bash scripts/slurm/local_cluster.sh up`)")
            continue
        rows.append(bench(backend, work, a.n, a.seconds, a.parallelism))
    cols = (
        "backend",
        "trials",
        "trial_s",
        "parallelism",
        "makespan_s",
        "ideal_s",
        "ratio",
        "overhead_per_trial_s",
        "in_job_overhead_s",
    )
    print(" | ".join(cols))
    for row in rows:
        print(" | ".join(str(row[c]) for c in cols))
    if a.json:
        a.json.write_text(json.dumps(rows, indent=2) + "\n")
    if a.work_dir is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
