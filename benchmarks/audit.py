"""Benchmark: audit time for a synthetic sweep of N grading reports (default 10,000).

Writes a synthetic two-regime output layout (launch.json, reports, cost CSVs, events) under a temp
dir (or --keep DIR) and prints a table of whole-process runs (median wall and CPU of --repeats):
`run_paper.py audit` (every table, summary.csv, report.md, plots and index.html) into the same --out
each run (a re-audit: PNGs whose inputs did not change are kept) and into an emptied --out each run
(every PNG drawn), against baselines measured in the same run: bare `python -c pass`, the imports
alone (the audit's modules and matplotlib's Agg figure: the floor under the empty --out row), and, when MLE-bench
is installed (`MLEBENCH_VENV` set, its checkout in `MLEBENCH_DIR`, default ~/.local/share/mle-bench, as
scripts/install_mlebench.sh puts them), MLE-bench's own aggregator
(`experiments/aggregate_grading_reports.py`) over the same reports, run by the venv's python.

Usage: python benchmarks/audit.py [--reports 10000] [--repeats 5] [--no-events] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
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

from synthetic import TASKS, make_sweep  # noqa: E402

MATPLOTLIB = "matplotlib.figure, matplotlib.backends.backend_agg"
"""What `audit.plots.new_figure` imports."""


def mlebench_reports(dirs: list[Path], root: Path) -> tuple[list[str], Path]:
    """The same reports in MLE-bench's run-group shape ({"competition_reports": [...]}) and a split file."""
    out, paths = root / "mlebench-reports", []
    out.mkdir(exist_ok=True)
    for directory in dirs:
        for report in sorted(directory.glob("runs/*/*_grading_report.json")):
            target = out / f"{directory.name}.{report.parent.name}.{report.name}"
            target.write_text(json.dumps({"competition_reports": [json.loads(report.read_text())]}))
            paths.append(str(target))
    split = root / "split.txt"
    split.write_text("\n".join(TASKS) + "\n")
    return paths, split


def whole_process(cmd: list[str], repeats: int, fresh: Path | None = None) -> tuple[float, float]:
    """Median wall and CPU seconds (user + sys of the child) of `repeats` runs after one warm-up.

    `fresh`: a dir removed before each run (untimed), e.g. the audit's output dir, so that nothing
    from an earlier run (the PNGs it keeps when their inputs are unchanged) is reused.
    """
    walls, cpus = [], []
    for i in range(repeats + 1):
        if fresh is not None:
            shutil.rmtree(fresh, ignore_errors=True)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=REPO)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if i:
            walls.append(wall)
            cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def aggregator_command(dirs: list[Path], root: Path) -> tuple[str, list[str]] | None:
    """(table label, command) of MLE-bench's installed aggregator over the same reports, or None."""
    venv = os.environ.get("MLEBENCH_VENV")
    checkout = Path(os.environ.get("MLEBENCH_DIR") or Path.home() / ".local/share/mle-bench")
    script = checkout / "experiments" / "aggregate_grading_reports.py"
    if not venv or not script.is_file():
        return None
    commit = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    label = f"MLE-bench aggregate_grading_reports.py @{commit or '?'} (MLEBENCH_VENV)"
    python = str(Path(venv) / "bin" / "python")
    paths, split = mlebench_reports(dirs, root)
    return label, [python, str(script), "--grading-reports", *paths, "--split", str(split), "--pad-missing"]


def main() -> None:
    """Run the benchmark."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reports", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-events", action="store_true")
    parser.add_argument("--keep", type=Path, default=None)
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="audit-bench-"))
    py = sys.executable
    try:
        t0 = time.perf_counter()
        dirs = make_sweep(root, args.reports, events=not args.no_events)
        print(f"synthetic sweep: {args.reports} reports in {len(dirs)} output dirs "
              f"(generated in {time.perf_counter() - t0:.1f} s)")  # fmt: skip
        print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (2 cores); "
              f"medians of {args.repeats} whole-process runs")  # fmt: skip
        audit = [py, "run_paper.py", "audit", *map(str, dirs), "--out", str(root / "audit")]
        fresh = [py, "run_paper.py", "audit", *map(str, dirs), "--out", str(root / "fresh")]
        # What any audit that draws its PNGs with matplotlib pays before reading a file: the floor under
        # the "empty --out" row (the one row the target is about), measured beside it.
        imports = "import mle_world.cli, mle_world.audit, mle_world.audit.pages, " + MATPLOTLIB
        cases = {
            "python -c pass": ([py, "-c", "pass"], None),
            "imports alone (the audit's modules and matplotlib's Agg figure; nothing read or drawn)": (
                [py, "-c", imports], None
            ),
            "run_paper.py audit again (tables, summary.csv, report.md, index.html; unchanged plots kept)": (
                audit, None
            ),
            "run_paper.py audit into an empty --out (everything written, plots drawn)": (fresh, root / "fresh"),
        }  # fmt: skip
        baseline = aggregator_command(dirs, root)
        if baseline is not None:
            cases[baseline[0]] = (baseline[1], None)
        results = {name: whole_process(cmd, args.repeats, out) for name, (cmd, out) in cases.items()}
        base_wall, base_cpu = results["python -c pass"]
        reference = results[baseline[0]] if baseline is not None else None
        print()
        print("| process | wall s | CPU s | CPU vs python -c pass | CPU vs MLE-bench aggregator |")
        print("|---|---:|---:|---:|---:|")
        for name, (wall, cpu) in results.items():
            versus = (
                f"{cpu / reference[1]:.2f}x" if reference else "n/a (MLE-bench not installed: MLEBENCH_VENV)"
            )
            print(f"| {name} | {wall:.2f} | {cpu:.2f} | {cpu / base_cpu:.1f}x | {versus} |")
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
