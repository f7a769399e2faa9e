"""The `estimate` command: a sweep's expected makespan, GPU-hours and cost before it is launched.

Reads the paper and cluster configs, the price table and, optionally, finished sweeps' launch.json and
status.json files; writes nothing. Prints a table per parallelism, with and without the gate's savings.
"""

from __future__ import annotations

import argparse
import math

from rich.console import Console
from rich.table import Table

from mle_world.cli.options import (
    csv_list,
    default_config_path,
    path_arg,
    positive_float,
    positive_int_list,
    seed_list,
)
from mle_world.errors import UserError, not_a_dir
from mle_world.launch.slurm.queries import DEFAULT_MAX_ARRAY_SIZE, query_period_s
from mle_world.plan.config import load_cluster_config, load_paper_config
from mle_world.plan.estimate import (
    Estimate,
    estimate,
    measured_savings,
    measured_times,
    parallelism_levels,
    planned_keys,
    planned_times,
    with_savings,
)
from mle_world.plan.sweep import Selection
from mle_world.tasks.registry import load_registry


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction in [0, 1), got {text!r}") from None
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"expected a fraction in [0, 1), got {text!r}")
    return value


def add_estimate_flags(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Simulate a sweep on the cluster: expected makespan, GPU-hours and cost per parallelism, "
        "from the time limits or a finished sweep's measured trial times."
    )
    p.add_argument("--regime", choices=["gated", "ungated"], required=True, help="the regime to simulate")
    p.add_argument("--config", type=path_arg, help="paper config (default configs/paper.yaml)")
    p.add_argument("--cluster-config", type=path_arg, help="cluster config (default configs/cluster.yaml)")
    p.add_argument(
        "--prices", type=path_arg, help="price table for the GPU-hour price (default configs/prices.yaml)"
    )
    p.add_argument("--tasks", type=csv_list, help="comma-separated competition ids (default: the config's)")
    p.add_argument("--configs", type=csv_list, help="comma-separated configuration names")
    p.add_argument("--seeds", type=seed_list, help="comma-separated seeds")
    p.add_argument(
        "--measured",
        type=path_arg,
        metavar="OUTPUT_DIR",
        help="trial times from a finished sweep (default: time limits)",
    )
    savings = p.add_mutually_exclusive_group()
    savings.add_argument("--savings", type=_fraction, help="fraction of trial time the gate saves (0-1)")
    savings.add_argument(
        "--savings-from",
        nargs=2,
        type=path_arg,
        metavar=("GATED_DIR", "UNGATED_DIR"),
        help="measure the gate's savings: finished gated and ungated sweeps of the same trials",
    )
    p.add_argument(
        "--parallelism",
        type=positive_int_list,
        help="comma-separated levels (default: ¼, ½, 1 and 2 × the config's)",
    )
    p.add_argument(
        "--overhead-s", type=float, default=0.0, help="scheduler time per trial besides the trial (s)"
    )
    p.add_argument(
        "--startup-s",
        type=float,
        default=0.0,
        help="time before the first trial starts, e.g. the array's wait in the queue (s)",
    )
    p.add_argument(
        "--handoff-s",
        type=float,
        default=None,
        help="a sweep in several arrays: how late a slot one array frees goes to a later array's trial "
        "(s; default: half the launcher's Slurm query period, its mean wait)",
    )
    p.add_argument(
        "--usd-per-gpu-hour",
        type=positive_float,
        help="GPU price (default: the price table's execution price)",
    )


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.1f} min"


def _money(value: float | None) -> str:
    return "unknown" if value is None else f"${value:,.0f}" if value >= 100 else f"${value:,.2f}"


def cmd_estimate(args: argparse.Namespace, console: Console) -> int:
    for flag, directory in (
        ("--measured", args.measured),
        *(("--savings-from", d) for d in args.savings_from or ()),
    ):
        if directory is not None and not directory.is_dir():
            raise UserError(f"{flag} {directory}: {not_a_dir(directory)}")
    registry = load_registry()
    config = load_paper_config(args.config or default_config_path("paper.yaml"), registry.__contains__)
    cluster_path = args.cluster_config or default_config_path("cluster.yaml")
    cluster = load_cluster_config(cluster_path if (args.cluster_config or cluster_path.exists()) else None)
    slurm = cluster.slurm
    if args.usd_per_gpu_hour is not None:
        if args.prices is not None:  # one of them would be ignored
            raise UserError("estimate: --prices and --usd-per-gpu-hour exclude each other")
        price: float | None = args.usd_per_gpu_hour
    else:
        from mle_world.costs.prices import load_prices

        price = load_prices(args.prices or default_config_path("prices.yaml")).execution.usd_per_gpu_hour
    if not (math.isfinite(args.overhead_s) and args.overhead_s >= 0):
        raise UserError("--overhead-s: expected a number >= 0")
    if not (math.isfinite(args.startup_s) and args.startup_s >= 0):
        raise UserError("--startup-s: expected a number >= 0")
    if args.handoff_s is not None and not (math.isfinite(args.handoff_s) and args.handoff_s >= 0):
        raise UserError("--handoff-s: expected a number >= 0")
    handoff_s = query_period_s(slurm.query_interval_s) / 2 if args.handoff_s is None else args.handoff_s
    levels = list(args.parallelism) if args.parallelism else None
    if (args.tasks, args.configs, args.seeds) != (None, None, None):
        from mle_world.cli.planning import check_seeds  # (what the launch checks: imported only here)
        from mle_world.cli.request import check_lists

        check_lists(args.tasks, args.configs, args.seeds)
        if args.seeds is not None:
            check_seeds(args.seeds, config.seeds)

    selection = Selection(tasks=args.tasks, configurations=args.configs, seeds=args.seeds)
    keys = planned_keys(config, args.regime, selection, registry.__contains__)
    if not keys:
        raise UserError("estimate: the selection has no trials")
    # The Slurm time limit the launcher asks for: the agent's budget plus the grading margin.
    limit_s = math.ceil(config.budget.time_limit_s / 60) * 60 + slurm.grading_margin_min * 60
    measured = measured_times(args.measured) if args.measured else None
    if args.measured and not measured:
        raise UserError(f"--measured {args.measured}: no finished trial (status.json with start and end)")
    durations = planned_times(keys, limit_s, measured)

    savings: float | None = args.savings
    savings_note = "given" if savings is not None else ""
    if args.savings_from:
        gated_dir, ungated_dir = args.savings_from
        flag = "--savings-from GATED_DIR UNGATED_DIR:"
        savings = measured_savings(
            measured_times(gated_dir, "gated", flag), measured_times(ungated_dir, "ungated", flag)
        )
        savings_note = f"measured: {gated_dir} vs {ungated_dir}"

    source = (
        f"measured in {args.measured} ({len(measured or {})} finished trials; others: mean of their task/configuration)"
        if measured
        else f"time limits: {_hours(limit_s)} each (budget {_hours(config.budget.time_limit_s)} "
        f"+ grading margin {slurm.grading_margin_min} min; an upper bound)"
    )
    console.print(
        f"{args.regime}: {len(keys)} trials, {slurm.gpus_per_trial} GPU(s) per trial, "
        f"GPU price {_money(price)}/GPU-hour; trial times: {source}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    if savings is not None:
        console.print(
            f"gate savings: {savings:.1%} of each trial's time ({savings_note})",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )

    size = min(slurm.max_array_tasks or DEFAULT_MAX_ARRAY_SIZE, DEFAULT_MAX_ARRAY_SIZE)
    split = len(keys) > size
    array_size = size if split else None
    table = Table(title=f"Simulated sweep ({args.regime}), trials started in array order on free slots")
    for column in ("parallelism", "makespan", "GPU-hours", "cost", "slot use"):
        table.add_column(column, justify="right")
    if savings is not None:
        for column in ("makespan (gated savings)", "GPU-hours (gated savings)", "cost (gated savings)"):
            table.add_column(column, justify="right")
    for level in levels or parallelism_levels(slurm.array_parallelism, len(keys)):
        gpus = slurm.gpus_per_trial
        base = estimate(
            durations,
            level,
            gpus_per_trial=gpus,
            usd_per_gpu_hour=price,
            overhead_s=args.overhead_s,
            startup_s=args.startup_s,
            array_size=array_size,
            handoff_s=handoff_s,
        )
        cells = _cells(base)
        if savings is not None:
            saved = estimate(
                with_savings(durations, savings), level, gpus_per_trial=gpus, usd_per_gpu_hour=price,
                overhead_s=args.overhead_s, startup_s=args.startup_s,
                array_size=array_size, handoff_s=handoff_s,
            )  # fmt: skip
            cells += _cells(saved)[1:4]
        label = f"{level} (cluster.yaml)" if level == slurm.array_parallelism else str(level)
        table.add_row(label, *cells[1:])
    console.print(table)
    if split:
        cap = "slurm.max_array_tasks" if slurm.max_array_tasks else "Slurm's default MaxArraySize"
        console.print(
            f"On Slurm: {math.ceil(len(keys) / size)} arrays of at most {size} trials ({cap}) sharing one "
            "array_parallelism: a slot goes on to a later array at the launcher's next poll, simulated "
            + (
                f"{handoff_s:g} s late (half the launcher's {query_period_s(slurm.query_interval_s):g} s "
                "query period, from slurm.query_interval_s: the mean wait; --handoff-s sets it)."
                if args.handoff_s is None
                else f"{handoff_s:g} s late (--handoff-s)."
            ),
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    console.print(
        "GPU-hours count each trial's whole allocation; LLM endpoint costs are not included "
        "(see costs/summary.csv after a sweep).",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    return 0


def _cells(result: Estimate) -> list[str]:
    return [
        str(result.parallelism),
        _hours(result.makespan_s),
        f"{result.gpu_hours:,.1f}",
        _money(result.cost_usd),
        f"{result.utilisation:.0%}",
    ]
