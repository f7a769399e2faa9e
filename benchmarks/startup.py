"""Benchmark: whole-process cost of the commands users wait on (dry run, CLI import), and import cost.

Reads configs/ and the installed package; writes dry-run output dirs in a temp dir and prints two
tables: whole-process wall/CPU medians with ratios against bare `python -c pass` measured in the same
run, and `python -X importtime` cumulative cost of the heavy libraries and of mle_world's modules.

    python benchmarks/startup.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HEAVY = (
    "pandas",
    "numpy",
    "matplotlib",
    "scipy",
    "sklearn",
    "openai",
    "httpx",
    "submitit",
    "rich",
    "pydantic",
    "yaml",
    "jinja2",
)
# Plans both regimes (714 trials) in one process through the CLI's own code path.
BOTH = """
import sys
from mle_world.cli import main
for regime in ("gated", "ungated"):
    code = main(["--regime", regime, "--dry-run", "--summary", "--output-dir", sys.argv[1] + "/" + regime,
                 "--enroot-image", "/img/aide.sqsh"])
    assert code == 0, code
"""


def run(cmd: list[str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user+sys of the child) of one whole-process run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=REPO)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def medians(cmd: list[str], repeats: int) -> tuple[float, float]:
    run(cmd)  # warm the page cache and .pyc files
    samples = [run(cmd) for _ in range(repeats)]
    return statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples)


def import_costs(module: str, repeats: int) -> dict[str, float]:
    """Median over `repeats` runs of `import_costs_once`."""
    runs = [import_costs_once(module) for _ in range(repeats)]
    names = {name for run in runs for name in run}
    return {name: statistics.median(run.get(name, 0.0) for run in runs) for name in names}


def import_costs_once(module: str) -> dict[str, float]:
    """Cumulative import time (s) per top-level package and per mle_world module, from -X importtime."""
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    ).stderr
    costs: dict[str, float] = {}
    for line in out.splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+(\d+) \|( *)(\S+)", line)
        if not m:
            continue
        cumulative, name = int(m.group(1)) / 1e6, m.group(3)
        top = name.split(".")[0]
        key = name if top == "mle_world" else top
        if top == "mle_world" or top in HEAVY:
            # the outermost import of a package carries its whole cost; keep the largest entry
            costs[key] = max(costs.get(key, 0.0), cumulative)
    return costs


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="mlew-bench-startup-") as tmp:
        dry = [py, "run_paper.py", "--dry-run", "--summary", "--enroot-image", "/img/aide.sqsh"]
        cases = {
            "python -c pass (baseline)": [py, "-c", "pass"],
            "import mle_world.cli": [py, "-c", "import mle_world.cli"],
            "run_paper.py --version": [py, "run_paper.py", "--version"],
            "dry run gated, 357 trials": [*dry, "--regime", "gated", "--output-dir", f"{tmp}/g"],
            "dry run both regimes, 714 trials, one process": [py, "-c", BOTH, tmp],
        }
        results = {name: medians(cmd, args.repeats) for name, cmd in cases.items()}
    base_wall, base_cpu = results["python -c pass (baseline)"]
    print(
        f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (2 cores); medians of {args.repeats}"
    )
    print()
    print("| command | wall s | CPU s | wall vs baseline | CPU vs baseline | CPU above baseline s |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, (wall, cpu) in results.items():
        print(
            f"| {name} | {wall:.3f} | {cpu:.3f} | {wall / base_wall:.1f}x | {cpu / base_cpu:.1f}x "
            f"| {cpu - base_cpu:.3f} |"
        )
    print()
    costs = import_costs("mle_world.cli", args.repeats)
    total = costs.get("mle_world.cli", sum(costs.values()))
    print(
        f"| `import mle_world.cli`: cumulative import time (-X importtime, median of {args.repeats}) | ms | share |"
    )
    print("|---|---:|---:|")
    rows = sorted(costs.items(), key=lambda kv: -kv[1])
    for name, seconds in rows:
        if seconds >= 0.002 or name in HEAVY:
            print(f"| {name} | {seconds * 1e3:.1f} | {seconds / total:.0%} |")
    absent = [h for h in HEAVY if h not in costs]
    print(f"\nnot imported by `import mle_world.cli`: {', '.join(absent) or 'none'}")


if __name__ == "__main__":
    main()
