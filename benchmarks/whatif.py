"""Benchmark: the what-if gates on a synthetic sweep of N grading reports (default 10,000), beside the audit.

Writes the synthetic two-regime sweep of benchmarks/audit.py (`synthetic.make_sweep`, imported) under a temp
dir (or --keep DIR), then gives its ungated world-model trials what the what-if needs
(`whatifkit.add_whatif_records`: spec.json with paper.yaml's settings, --steps consulted steps with
confident verdicts, outcomes and execution times), and prints a table of in-process timings (median CPU
and wall of --repeats, each on a freshly loaded sweep): the whole audit (`run_audit`: tables, summary.csv,
report.md, plots, index.html, into an emptied --out) with the what-if turned off, the same audit with it,
the what-if's tables alone (`whatif_rows` on a loaded sweep) and, of those, reading the decisions from
events.jsonl; each against the audit without the what-if, measured in the same process.

Usage: python benchmarks/whatif.py [--reports 10000] [--steps 5] [--repeats 5] [--keep DIR]
"""

from __future__ import annotations

import argparse
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
from whatifkit import add_whatif_records  # noqa: E402

import mle_world.audit as audit_package  # noqa: E402
from mle_world.audit import load_sweep, run_audit  # noqa: E402
from mle_world.audit.whatif import WhatIf, trial_decisions, whatif_rows  # noqa: E402
from mle_world.collector import collector_paused  # noqa: E402


def timed(
    work: Callable[[], object], repeats: int, before: Callable[[], object] | None = None
) -> tuple[float, float]:
    """Median CPU and wall seconds of `work` over `repeats` runs after a warm-up; `before` runs untimed."""
    cpus, walls = [], []
    for i in range(repeats + 1):
        if before is not None:
            before()
        with collector_paused():  # as run_audit computes its tables
            cpu, wall = time.process_time(), time.perf_counter()
            work()
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        if i:
            cpus.append(cpu)
            walls.append(wall)
    return statistics.median(cpus), statistics.median(walls)


def main() -> None:
    """Run the benchmark."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reports", type=int, default=10_000)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--keep", type=Path, default=None)
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="whatif-bench-"))
    out = root / "audit"
    try:
        t0 = time.perf_counter()
        dirs = make_sweep(root, args.reports, events=True)
        rewritten = add_whatif_records(dirs, steps=args.steps)
        print(f"synthetic sweep: {args.reports} reports in {len(dirs)} output dirs, {rewritten} ungated "
              f"world-model trials with {args.steps} consulted steps each "
              f"(generated in {time.perf_counter() - t0:.1f} s)")  # fmt: skip
        result = whatif_rows(load_sweep(dirs))
        decisions = sum(r.decisions for r in result.paper_rows)
        print(f"what-if: {decisions} decisions, {len(result.rows)} table rows, {len(result.curves)} plot points; "
              f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} (2 cores); "
              f"medians of {args.repeats} runs in this process")  # fmt: skip

        def emptied() -> None:
            shutil.rmtree(out, ignore_errors=True)

        def audit_all() -> None:
            run_audit(dirs, out_dir=out)

        def without_whatif() -> None:
            real = audit_package.whatif_rows
            audit_package.whatif_rows = lambda sweep: WhatIf()  # type: ignore[assignment]
            try:
                run_audit(dirs, out_dir=out)
            finally:
                audit_package.whatif_rows = real

        loaded: list[object] = []

        def load() -> None:
            loaded[:] = [load_sweep(dirs)]

        def tables() -> None:
            whatif_rows(loaded[0])  # type: ignore[arg-type]

        def reading() -> None:
            sweep = loaded[0]
            for trial in sweep.trials:  # type: ignore[attr-defined]
                if trial.regime == "ungated" and trial.configuration != "aide":
                    trial_decisions(trial)

        cases = {
            "run_paper.py audit's work without the what-if (run_audit, empty --out)": (
                without_whatif,
                emptied,
            ),
            "run_paper.py audit's work with the what-if (run_audit, empty --out)": (audit_all, emptied),
            "what-if tables alone (whatif_rows on a loaded sweep)": (tables, load),
            "  of which reading the decisions (events.jsonl, spec.json)": (reading, load),
        }
        results = {name: timed(work, args.repeats, before) for name, (work, before) in cases.items()}
        base_cpu = results[next(iter(results))][0]
        print()
        print("| work | CPU s | wall s | CPU vs the audit without the what-if |")
        print("|---|---:|---:|---:|")
        for name, (cpu, wall) in results.items():
            print(f"| {name} | {cpu:.2f} | {wall:.2f} | {cpu / base_cpu:.2f}x |")
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
