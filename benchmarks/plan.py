"""Benchmark: the dry run (`run_paper.py --dry-run --summary`) of 357 and 2,380 trials, and its phases.

Reads configs/; writes a 10-seed copy of configs/paper.yaml (seeds 34-43: 7 configurations x 17 tasks x
10 seeds = 1,190 trials a regime) and the dry runs' output dirs under a temp dir, and prints two tables:
- whole-process runs (median wall and CPU of --repeats, every case once a round so a change of the
  machine's load hits them alike), with ratios against bare `python -c pass` measured in the same run:
  357 trials (the shipped config, one regime), 2,380 (both regimes of the 10-seed config in one process,
  through the CLI's own `main`), and each 1,190-trial regime as its own command. `--against CHECKOUT`
  adds the same commands run from another checkout's run_paper.py and src/ (e.g. a copy of main before a
  change), and the ratio of CPU and wall to them;
- in-process phases of this checkout (load config, expand, render; CPU time) per runtime at both sizes.

Usage: python benchmarks/plan.py [--repeats 5] [--against CHECKOUT]
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

from rich.console import Console
from rich.table import Table

from mle_world.plan.config import load_paper_config
from mle_world.plan.render import Renderer, RuntimeSpec, render_command, view_paths
from mle_world.plan.sweep import Selection, expand
from mle_world.tasks.registry import load_registry

REPO = Path(__file__).resolve().parents[1]
SEEDS = tuple(range(34, 44))
BOTH = """
import sys
from mle_world.cli import main
for regime in ("gated", "ungated"):
    code = main(["--config", sys.argv[1], "--regime", regime, "--dry-run", "--summary",
                 "--output-dir", sys.argv[2] + "/" + regime, "--enroot-image", "/img/aide.sqsh"])
    assert code == 0, code
"""
"""Both regimes of a config in one process, through the CLI's code path (as benchmarks/startup.py)."""

Run = tuple[float, float]


def ten_seeds(directory: Path) -> Path:
    """configs/paper.yaml with ten seeds (its task list by absolute path)."""
    text = (REPO / "configs" / "paper.yaml").read_text()
    text, seeds = re.subn(r"^seeds: \[.*\]$", f"seeds: [{', '.join(map(str, SEEDS))}]", text, flags=re.M)
    text, tasks = re.subn(r"^tasks: tasks\.txt", f"tasks: {REPO / 'configs' / 'tasks.txt'}", text, flags=re.M)
    if (seeds, tasks) != (1, 1):
        raise SystemExit("configs/paper.yaml: no `seeds: [...]` or `tasks: tasks.txt` line to replace")
    path = directory / "paper-10-seeds.yaml"
    path.write_text(text)
    return path


def once(cmd: list[str], env: dict[str, str]) -> Run:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=REPO, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def whole_process(tmp: Path, config: Path, repeats: int, against: Path | None) -> None:
    py = sys.executable
    checkouts = [("", REPO)] + ([(" (against)", against)] if against else [])
    cases: dict[str, tuple[list[str], dict[str, str]]] = {
        "python -c pass": ([py, "-c", "pass"], dict(os.environ))
    }
    for label, checkout in checkouts:
        env = {**os.environ, "PYTHONPATH": str(checkout / "src")}
        dry = [
            py,
            str(checkout / "run_paper.py"),
            "--dry-run",
            "--summary",
            "--enroot-image",
            "/img/aide.sqsh",
        ]
        out = tmp / f"out{len(cases)}"
        cases[f"357 trials: gated, paper.yaml{label}"] = (
            [*dry, "--regime", "gated", "--output-dir", f"{out}/g"],
            env,
        )
        cases[f"2,380 trials: both regimes, 10 seeds, one process{label}"] = (
            [py, "-c", BOTH, str(config), f"{out}/both"],
            env,
        )
        for regime in ("gated", "ungated"):
            argv = [*dry, "--config", str(config), "--regime", regime, "--output-dir", f"{out}/{regime}"]
            cases[f"1,190 trials: {regime}, 10 seeds{label}"] = (argv, env)
    runs: dict[str, list[Run]] = {name: [] for name in cases}
    for i in range(repeats + 1):  # the first round warms the page cache and .pyc files
        for name, (cmd, env) in cases.items():
            run = once(cmd, env)
            if i:
                runs[name].append(run)
    results = {
        name: (statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs))
        for name, rs in runs.items()
    }
    for label, _ in checkouts:  # the 2,380 trials as the two commands users type
        gated, ungated = (
            results[f"1,190 trials: gated, 10 seeds{label}"],
            results[f"1,190 trials: ungated, 10 seeds{label}"],
        )
        results[f"2,380 trials: the two commands, summed{label}"] = (
            gated[0] + ungated[0],
            gated[1] + ungated[1],
        )
    base_wall, base_cpu = results["python -c pass"]
    print(
        f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (2 cores); medians of {repeats}, interleaved"
    )
    if against:
        print(f"against: {against} (its src/ first on PYTHONPATH)")
    print()
    print("| dry run --summary | wall s | CPU s | CPU vs python -c pass | CPU vs against | wall vs against |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, (wall, cpu) in results.items():
        other = results.get(f"{name} (against)")
        vs = f"{cpu / other[1]:.2f}x | {wall / other[0]:.2f}x" if other else " | "
        print(f"| {name} | {wall:.2f} | {cpu:.2f} | {cpu / base_cpu:.1f}x | {vs} |")


def phases(config_10: Path, repeats: int) -> None:
    registry = load_registry()
    runtimes = {
        "enroot": RuntimeSpec(
            "enroot", image="/img/aide.sqsh", env_names=("CUDA_VISIBLE_DEVICES", "CODER_API_KEY")
        ),
        "pyxis": RuntimeSpec("pyxis", image="/img/aide.sqsh", env_names=("CUDA_VISIBLE_DEVICES",)),
        "process": RuntimeSpec("process", python="/usr/bin/python3", host_paths=("/opt/py",)),
    }
    sizes = {"357": (REPO / "configs" / "paper.yaml", ("gated",)), "2,380": (config_10, ("gated", "ungated"))}
    table = Table(title=f"in-process phases, this checkout: CPU ms (median of {repeats})")
    for column in ("runtime", "trials", "load config ms", "expand ms", "render ms", "per trial µs", "vs 357"):
        table.add_column(column, justify="right")
    for name, runtime in runtimes.items():
        per_357 = 0.0
        for size, (path, regimes) in sizes.items():
            loads, expands, renders, count = [], [], [], 0
            for _ in range(repeats):
                t0 = time.process_time()
                config = load_paper_config(path, registry.__contains__)
                t1 = time.process_time()
                trials = [
                    t
                    for regime in regimes
                    for t in expand(
                        config,
                        regime,
                        Selection(),
                        output_dir=Path("/out"),
                        data_dir=Path("/data"),
                        known_task=registry.__contains__,
                        view=lambda a, b, rt=runtime: view_paths(rt, a, b),
                        direction=registry.lower_is_better,
                    )
                ]
                t2 = time.process_time()
                renderer = Renderer()
                for trial in trials:
                    render_command(trial, runtime, renderer)
                t3 = time.process_time()
                loads.append(t1 - t0)
                expands.append(t2 - t1)
                renders.append(t3 - t2)
                count = len(trials)
            load, exp, ren = (statistics.median(x) for x in (loads, expands, renders))
            per_357 = per_357 or exp + ren
            table.add_row(
                name,
                size,
                f"{load * 1e3:.1f}",
                f"{exp * 1e3:.1f}",
                f"{ren * 1e3:.1f}",
                f"{(exp + ren) / count * 1e6:.0f}",
                f"{(exp + ren) / per_357:.2f}x",
            )
    Console().print(table)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--against", type=Path, default=None, help="another checkout to time the same way")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mlew-bench-plan-") as tmp:
        config = ten_seeds(Path(tmp))
        whole_process(Path(tmp), config, args.repeats, args.against.resolve() if args.against else None)
        print()
        phases(config, args.repeats)


if __name__ == "__main__":
    main()
