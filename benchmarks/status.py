"""Benchmark: `run_paper.py status` on a synthetic Slurm sweep of N trials (default 10,000) days in.

Writes one output dir (launch.json, grading reports, cost CSVs, events and a status.json per trial: most
succeeded, 6 % failed with varied causes, 64 running, the rest submitted or pending; tests/support/
synthetic.py) under a temp dir (or --keep DIR) and prints a table of whole-process runs (median wall and
CPU of --repeats): `status`, `status --json`, `status --costs` (every cost CSV read), and bare `python -c pass` as the baseline measured in the
same run. `--against CHECKOUT` adds the same commands run from another checkout's run_paper.py and src/
(e.g. /work/main before a change), so before and after share one table. Also prints how many lines
`status` wrote. The trials' Slurm job ids are ones no cluster here knows: where squeue/sacct exist, their
(empty) answers are part of the time, as on a login node.

Usage: python benchmarks/status.py [--trials 10000] [--repeats 5] [--keep DIR] [--against CHECKOUT]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "support"))  # the tests' helpers

from synthetic import add_statuses, make_sweep  # noqa: E402


def whole_process(cmd: list[str], repeats: int, env: dict[str, str]) -> tuple[float, float, int]:
    """Median wall and CPU seconds (user + sys of the child) of `repeats` runs after one warm-up, and
    the lines the last run printed."""
    walls, cpus = [], []
    lines = 0
    for i in range(repeats + 1):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, cwd=REPO, env=env, check=False)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode not in (0, 1):
            raise SystemExit(f"{cmd}: exit {proc.returncode}")
        lines = proc.stdout.count(b"\n")
        if i:
            walls.append(wall)
            cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus), lines


def main() -> None:
    """Run the benchmark."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--keep", type=Path, default=None)
    parser.add_argument("--against", type=Path, default=None, help="another checkout to time the same way")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="status-bench-"))
    py = sys.executable
    env = {**os.environ, "COLUMNS": "160"}
    try:
        t0 = time.perf_counter()
        (out,) = make_sweep(root, args.trials, events=False, regimes=("gated",))
        counts = add_statuses(out)
        print(f"synthetic sweep: {args.trials} trials in {out} ({counts}; generated in "
              f"{time.perf_counter() - t0:.1f} s)")  # fmt: skip
        print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (2 cores); "
              f"medians of {args.repeats} whole-process runs")  # fmt: skip
        cases: dict[str, tuple[list[str], dict[str, str]]] = {"python -c pass": ([py, "-c", "pass"], env)}
        checkouts = [("", REPO)] + ([(f" ({args.against})", args.against.resolve())] if args.against else [])
        for label, checkout in checkouts:
            # The other checkout's src/ first on the path: its code, this interpreter and libraries.
            the_env = {**env, "PYTHONPATH": str(checkout / "src")}
            status = [py, str(checkout / "run_paper.py"), "status", str(out)]
            cases[f"run_paper.py status{label}"] = (status, the_env)
            flags = (checkout / "src/mle_world/cli/results.py").read_text()
            for flag in ("--json", "--costs"):
                if not label or flag in flags:
                    cases[f"run_paper.py status {flag}{label}"] = ([*status, flag], the_env)
        results = {name: whole_process(cmd, args.repeats, e) for name, (cmd, e) in cases.items()}
        base_wall, base_cpu, _ = results["python -c pass"]
        print()
        print("| process | wall s | CPU s | CPU vs python -c pass | lines printed |")
        print("|---|---:|---:|---:|---:|")
        for name, (wall, cpu, lines) in results.items():
            print(f"| {name} | {wall:.2f} | {cpu:.2f} | {cpu / base_cpu:.1f}x | {lines} |")
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
