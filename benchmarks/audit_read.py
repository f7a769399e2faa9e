"""Benchmark: the audit's reading of a synthetic sweep (`audit.collect.load_sweep`), in process.

Writes the synthetic two-regime sweep of `benchmarks/audit.py` (N reports, cost CSVs, events) twice
under a temp dir (or --keep DIR): once with the audit digest the harness writes beside each trial dir
when the trial ends (`audit/digest.py`), once without (trials of a harness before it). With --steps K, each
events.jsonl also gets K agent steps of three lines (two LLM calls and an execution, each its own
timestamp) before its predictions, as real trials write them (their digests written after). Prints a
table of CPU seconds (medians of --repeats, cyclic GC paused as the audit pauses it): `load_sweep` into
an empty audit dir (a first audit) of each sweep and, with `open_parsed_inputs`, from one that keeps
what the first read parsed (a re-audit), against the floor measured in the same run: the system calls
alone (open, fstat, read and close of every file a first audit without digests reads, a stat and a
listing of every trial dir).

Usage: python benchmarks/audit_read.py [--reports 10000] [--steps 0] [--repeats 5] [--keep DIR]
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "support"))  # the tests' helpers

from synthetic import make_sweep  # noqa: E402

from mle_world.audit.cache import open_parsed_inputs  # noqa: E402
from mle_world.audit.collect import load_sweep  # noqa: E402


def inputs(dirs: list[Path]) -> tuple[list[str], list[str]]:
    """The files the audit reads (reports, cost CSVs, events.jsonl) and the trial dirs it lists."""
    files, trial_dirs = [], []
    for directory in dirs:
        files += sorted(str(p) for p in directory.glob("runs/*/*_grading_report.json"))
        files += sorted(str(p) for p in (directory / "costs").glob("*.csv"))
        files += sorted(str(p) for p in directory.glob("runs/*/*/events.jsonl"))
        trial_dirs += sorted(str(p) for p in directory.glob("runs/*/*") if p.is_dir())
    return files, trial_dirs


def system_calls(files: list[str], trial_dirs: list[str]) -> None:
    """Only the system calls of a first read: every file opened, fstat'ed, read, closed; dirs listed."""
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        os.read(fd, os.fstat(fd).st_size + 1)
        os.close(fd)
    for directory in trial_dirs:
        os.stat(directory)
        os.listdir(directory)


def cpu(run: Callable[[], object], repeats: int) -> float:
    """Median CPU seconds of `repeats` runs after one warm-up, cyclic GC paused."""
    times = []
    for i in range(repeats + 1):
        gc.collect()
        gc.disable()
        try:
            t0 = time.process_time()
            run()
            elapsed = time.process_time() - t0
        finally:
            gc.enable()
        if i:
            times.append(elapsed)
    return statistics.median(times)


def main() -> None:
    """Run the benchmark."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reports", type=int, default=10_000)
    parser.add_argument("--steps", type=int, default=0, help="agent steps added to each events.jsonl")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--keep", type=Path, default=None)
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="audit-read-bench-"))
    try:
        dirs = make_sweep(root / "digested", args.reports, events=True, steps=args.steps)
        plain = make_sweep(root / "plain", args.reports, events=True, digests=False, steps=args.steps)
        files, trial_dirs = inputs(plain)
        print(
            f"synthetic sweep: {args.reports} reports, {len(files)} files read, {len(trial_dirs)} trial dirs, "
            f"{args.steps} agent steps (3 lines each) before the 5 predictions of each events.jsonl"
        )
        print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (2 cores); "
              f"medians of {args.repeats} runs in one process")  # fmt: skip
        kept = root / "kept"
        kept.mkdir(exist_ok=True)
        first = open_parsed_inputs(kept)
        load_sweep(dirs, first)
        first.save()

        def first_read(sweep: list[Path]) -> Callable[[], None]:
            def run() -> None:
                empty = Path(tempfile.mkdtemp(dir=root))
                load_sweep(sweep, open_parsed_inputs(empty))
                shutil.rmtree(empty)

            return run

        cases = {
            "system calls only (open, fstat, read, close per file; stat, listdir per trial dir)": (
                lambda: system_calls(files, trial_dirs)
            ),
            "load_sweep into an empty audit dir, no digests (first audit: every file read and parsed)": (
                first_read(plain)
            ),
            "load_sweep into an empty audit dir, digests (first audit: a digest read, the rest stat'ed)": (
                first_read(dirs)
            ),
            "open_parsed_inputs + load_sweep with the kept inputs (re-audit: a stat per unchanged file)": (
                lambda: load_sweep(dirs, open_parsed_inputs(kept))
            ),
        }
        results = {name: cpu(run, args.repeats) for name, run in cases.items()}
        floor = next(iter(results.values()))
        print()
        print("| reading | CPU s | vs system calls only |")
        print("|---|---:|---:|")
        for name, seconds in results.items():
            print(f"| {name} | {seconds:.3f} | {seconds / floor:.2f}x |")
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
