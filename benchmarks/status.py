"""Benchmark: `run_paper.py status` on synthetic Slurm sweeps of 10,000 and 100,000 trials days in.

Writes an output dir per size (launch.json, grading reports, cost CSVs and a status.json per trial: most
succeeded, 6 % failed with varied causes, 64 running, the rest submitted or pending, in arrays of 1,000;
tests/support/synthetic.py) under a temp dir (or --keep DIR, reused when there already) and prints a table
of whole-process runs (median wall and CPU of --repeats, the cases interleaved so a change of the machine's
load hits them alike): `status`, `status --json`, `--costs` with --costs (every cost CSV read), and bare
`python -c pass` as the baseline measured in the same run. `--against CHECKOUT` adds the same commands run
from another checkout's run_paper.py and src/ (e.g. /work/main before a change), so before and after
share one table, with the ratio of their CPU. The trials' Slurm job ids are ones no cluster here knows:
where squeue/sacct exist, their (empty) answers are part of the time, as on a login node.

A last table times one `status` of the smallest sweep against a Slurm controller that is down (a private
slurm.conf naming a loopback port nothing listens on, through SLURM_CONF) and counts the squeue and
sacct runs it made (through a PATH shim that logs and runs the real tool).

Usage: python benchmarks/status.py [--trials 10000,100000] [--repeats 3] [--keep DIR] [--against CHECKOUT]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "support"))  # the tests' helpers

from synthetic import add_statuses, make_sweep  # noqa: E402

Run = tuple[float, float, int]
"""Wall seconds, CPU seconds (user + sys of the child), lines printed."""


def once(cmd: list[str], env: dict[str, str]) -> Run:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, cwd=REPO, env=env, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{cmd}: exit {proc.returncode}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu, proc.stdout.count(b"\n")


def interleaved(cases: dict[str, tuple[list[str], dict[str, str]]], repeats: int) -> dict[str, Run]:
    """Medians of `repeats` runs of every case after one warm-up round, round-robin."""
    runs: dict[str, list[Run]] = {name: [] for name in cases}
    for i in range(repeats + 1):
        for name, (cmd, env) in cases.items():
            run = once(cmd, env)
            if i:
                runs[name].append(run)
    return {
        name: (statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs), rs[-1][2])
        for name, rs in runs.items()
    }


def sweep_of(root: Path, trials: int) -> tuple[Path, str]:
    """The synthetic sweep of `trials` under root (made once, reused with --keep) and its counts."""
    out = root / str(trials) / "paper-gated"
    mark = root / str(trials) / "counts.json"
    if not mark.is_file():
        shutil.rmtree(root / str(trials), ignore_errors=True)
        t0 = time.perf_counter()
        (out,) = make_sweep(root / str(trials), trials, events=False, regimes=("gated",))
        counts = add_statuses(out)
        mark.write_text(json.dumps(counts))
        print(f"generated {trials} trials in {time.perf_counter() - t0:.0f} s")
    counts = json.loads(mark.read_text())
    return out, ", ".join(f"{k} {v}" for k, v in counts.items())


def dead_controller(root: Path) -> tuple[dict[str, str], Path]:
    """Env for Slurm's clients naming a controller nobody answers for, and the log of their runs."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    conf = root / "dead-slurm" / "slurm.conf"
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_text(
        "ClusterName=unreachable\nSlurmctldHost=localhost(127.0.0.1)\n"
        f"SlurmctldPort={port}\nAccountingStoragePort={port}\nAuthType=auth/munge\n"
        "NodeName=localhost CPUs=1 State=UNKNOWN\nPartitionName=p Nodes=localhost Default=YES\n"
    )
    shims, log = root / "dead-slurm" / "bin", root / "dead-slurm" / "calls.log"
    shims.mkdir(exist_ok=True)
    for tool in ("squeue", "sacct"):
        real = shutil.which(tool)
        if real is None:
            raise SystemExit(f"{tool} is not installed")
        shim = shims / tool
        shim.write_text(f'#!/bin/sh\necho {tool} >> "{log}"\nexec "{real}" "$@"\n')
        shim.chmod(0o755)
    env = {"SLURM_CONF": str(conf), "PATH": f"{shims}:{os.environ['PATH']}"}
    return env, log


def main() -> None:
    """Run the benchmark."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", default="10000,100000", help="comma-separated sweep sizes")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--keep", type=Path, default=None, help="make the sweeps here once, reuse them")
    parser.add_argument("--against", type=Path, default=None, help="another checkout to time the same way")
    parser.add_argument("--costs", action="store_true", help="also time `status --costs`")
    args = parser.parse_args()
    sizes = [int(n) for n in args.trials.split(",")]
    root = args.keep or Path(tempfile.mkdtemp(prefix="status-bench-"))
    py = sys.executable
    env = {**os.environ, "COLUMNS": "160"}
    checkouts = [("", REPO)] + ([(" (against)", args.against.resolve())] if args.against else [])
    try:
        sweeps = {n: sweep_of(root, n) for n in sizes}
        for n, (out, counts) in sweeps.items():
            print(f"synthetic sweep: {n} trials in {out} ({counts})")
        if args.against:
            print(f"against: {args.against.resolve()} (its src/ first on PYTHONPATH)")
        print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (2 cores); "
              f"medians of {args.repeats} whole-process runs, interleaved")  # fmt: skip
        print()
        print(
            "| trials | process | wall s | CPU s | CPU vs python -c pass | CPU vs against | lines printed |"
        )
        print("|---:|---|---:|---:|---:|---:|---:|")
        cpu_of: dict[tuple[int, str], float] = {}
        for n, (out, _) in sweeps.items():
            cases: dict[str, tuple[list[str], dict[str, str]]] = {"python -c pass": ([py, "-c", "pass"], env)}
            for label, checkout in checkouts:
                the_env = {**env, "PYTHONPATH": str(checkout / "src")}
                status = [py, str(checkout / "run_paper.py"), "status", str(out)]
                cases[f"status{label}"] = (status, the_env)
                cases[f"status --json{label}"] = ([*status, "--json"], the_env)
                if args.costs:
                    cases[f"status --costs{label}"] = ([*status, "--costs"], the_env)
            results = interleaved(cases, args.repeats)
            base_cpu = results["python -c pass"][1]
            for name, (wall, cpu, lines) in results.items():
                cpu_of[(n, name)] = cpu
                other = results.get(f"{name} (against)")
                against = f"{cpu / other[1]:.2f}x" if other else ""
                print(
                    f"| {n:,} | {name} | {wall:.2f} | {cpu:.2f} | {cpu / base_cpu:.1f}x | {against} | {lines} |"
                )
        if len(sizes) > 1:
            low, high = min(sizes), max(sizes)
            print()
            print(f"| process | CPU at {high:,} / CPU at {low:,} |")
            print("|---|---:|")
            for label, _ in checkouts:
                name = f"status{label}"
                print(f"| {name} | {cpu_of[(high, name)] / cpu_of[(low, name)]:.1f}x |")
        if shutil.which("squeue") is not None:
            out, _ = sweeps[min(sizes)]
            dead_env, log = dead_controller(root)
            print()
            print(
                f"| {min(sizes):,} trials, Slurm controller down | wall s | CPU s | squeue runs | sacct runs |"
            )
            print("|---|---:|---:|---:|---:|")
            for label, checkout in checkouts:
                log.unlink(missing_ok=True)
                the_env = {**env, **dead_env, "PYTHONPATH": str(checkout / "src")}
                wall, cpu, _ = once([py, str(checkout / "run_paper.py"), "status", str(out)], the_env)
                tools = log.read_text().split() if log.exists() else []
                print(
                    f"| status{label} | {wall:.1f} | {cpu:.2f} | {tools.count('squeue')} | {tools.count('sacct')} |"
                )
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
