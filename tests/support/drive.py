"""Runs `run_sweep` on a launchkit plan in its own process (Ctrl-C and Slurm tests drive it from outside).

Usage: python drive.py OUT DATA N MODE SECONDS BACKEND [--retry infra|all] [--workers K] [--gpus 0,1]
       [--parallelism P] [--budget S] [--max-attempts M] [--no-wait].
Writes what run_sweep writes; exits with its exit code.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from launchkit import fast_cluster, make_plan  # noqa: E402

from mle_world.errors import UserError  # noqa: E402
from mle_world.launch import parse_gpu_devices, run_sweep  # noqa: E402
from mle_world.launch.display import PlainDisplay  # noqa: E402
from mle_world.plan.sweep_plan import LaunchOptions  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    for name in ("out", "data", "n", "mode", "seconds", "backend"):
        ap.add_argument(name)
    ap.add_argument("--retry", default=None)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--gpus", default="0,1")
    ap.add_argument("--parallelism", type=int, default=2)
    ap.add_argument("--budget", type=float, default=300.0)
    ap.add_argument("--max-attempts", type=int, default=3)
    ap.add_argument("--no-wait", action="store_true")
    a = ap.parse_args()
    plan = make_plan(
        Path(a.out),
        Path(a.data),
        int(a.n),
        mode=a.mode,
        seconds=float(a.seconds),
        budget_s=a.budget,
        cluster=fast_cluster(parallelism=a.parallelism, max_attempts=a.max_attempts),
    )
    options = LaunchOptions(
        backend=a.backend,
        n_workers=a.workers,
        gpu_devices=parse_gpu_devices(a.gpus),
        retry_failed=a.retry,
        show_progress=False,
        wait=not a.no_wait,
    )
    try:
        return run_sweep(plan, options, post_trial=None, display=PlainDisplay())
    except UserError as exc:
        print(exc, file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
