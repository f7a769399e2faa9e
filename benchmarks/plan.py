"""Benchmark: time to expand and render both regimes of the shipped paper config (714 trials).

Reads configs/; writes nothing. Run: `python benchmarks/plan.py` (prints a table).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from mle_world.plan.config import load_paper_config
from mle_world.plan.render import Renderer, RuntimeSpec, render_command, view_paths
from mle_world.plan.sweep import Selection, expand
from mle_world.tasks.registry import load_registry

REPO = Path(__file__).resolve().parents[1]
REPEATS = 5


def main() -> None:
    registry = load_registry()
    runtimes = {
        "enroot": RuntimeSpec(
            "enroot", image="/img/aide.sqsh", env_names=("CUDA_VISIBLE_DEVICES", "CODER_API_KEY")
        ),
        "pyxis": RuntimeSpec("pyxis", image="/img/aide.sqsh", env_names=("CUDA_VISIBLE_DEVICES",)),
        "process": RuntimeSpec("process", python="/usr/bin/python3", host_paths=("/opt/py",)),
    }
    table = Table(title=f"plan: expand + render both regimes (median of {REPEATS})")
    for column in (
        "runtime",
        "trials",
        "load config ms",
        "expand ms",
        "render ms",
        "per trial µs",
        "vs expand only",
    ):
        table.add_column(column, justify="right")
    for name, runtime in runtimes.items():
        loads, expands, renders, count = [], [], [], 0
        for _ in range(REPEATS):
            t0 = time.perf_counter()
            config = load_paper_config(REPO / "configs" / "paper.yaml", registry.__contains__)
            t1 = time.perf_counter()
            trials = [
                t
                for regime in ("gated", "ungated")
                for t in expand(
                    config,
                    regime,
                    Selection(),
                    output_dir=Path("/out"),
                    data_dir=Path("/data"),
                    known_task=registry.__contains__,
                    view=lambda a, b, rt=runtime: view_paths(rt, a, b),
                )
            ]
            t2 = time.perf_counter()
            renderer = Renderer()
            for trial in trials:
                render_command(trial, runtime, renderer)
            t3 = time.perf_counter()
            loads.append(t1 - t0)
            expands.append(t2 - t1)
            renders.append(t3 - t2)
            count = len(trials)
        load, exp, ren = (statistics.median(x) for x in (loads, expands, renders))
        table.add_row(
            name,
            str(count),
            f"{load * 1e3:.1f}",
            f"{exp * 1e3:.1f}",
            f"{ren * 1e3:.1f}",
            f"{(exp + ren) / count * 1e6:.0f}",
            f"{(exp + ren) / exp:.2f}x",
        )
    Console().print(table)


if __name__ == "__main__":
    # No options; --help says what it does instead of running the benchmark.
    argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0]).parse_args()
    main()
