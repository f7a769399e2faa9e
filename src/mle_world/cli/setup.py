"""Setup commands: `prepare` (competition data) and `check-endpoints` (probe the three roles).

Reads configs, the environment and the endpoints; `prepare` writes prepared data under --data-dir. Prints.
"""

from __future__ import annotations

import argparse

from rich.console import Console

from mle_world.cli.checks import check_writable_dir
from mle_world.cli.display import RichDisplay
from mle_world.cli.options import (
    EndpointFlags,
    add_endpoint_flags,
    csv_list,
    default_config_path,
    default_data_dir,
    endpoint_overrides,
    path_arg,
)
from mle_world.errors import UserError
from mle_world.plan.config import load_paper_config
from mle_world.tasks.registry import load_registry


def add_prepare_flags(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Prepare competitions' data: local ones offline, MLE-bench ones with `mlebench prepare` "
        "(Kaggle credentials needed)."
    )
    p.add_argument(
        "--config", type=path_arg, help="paper config whose tasks to prepare (default configs/paper.yaml)"
    )
    p.add_argument("--data-dir", type=path_arg, help="where to prepare (default ~/.cache/mle-bench/data)")
    p.add_argument("--tasks", type=csv_list, help="comma-separated ids (default: the config's task list)")
    p.add_argument(
        "--competitions-dir", type=path_arg, action="append", default=[], help="extra local competitions"
    )


def add_check_endpoints_flags(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Probe the coder, feedback and world endpoints (/v1/models and one tiny completion): served "
        "model ids, context length, latency and tool calling."
    )
    p.add_argument(
        "--config", type=path_arg, help="paper config with the endpoints (default configs/paper.yaml)"
    )
    add_endpoint_flags(p)


def cmd_prepare(args: argparse.Namespace, console: Console) -> int:
    from mle_world.tasks.prepare import prepare_tasks

    registry = load_registry(list(args.competitions_dir))
    if args.tasks:
        tasks = list(args.tasks)
        for task in tasks:
            if task not in registry:
                raise UserError(f"--tasks: unknown task id '{task}' (see `run_paper.py --list`)")
    else:
        config = load_paper_config(args.config or default_config_path("paper.yaml"), registry.__contains__)
        tasks = list(config.tasks)
    # Checked here, created by prepare_tasks after its credential checks: a refusal leaves no empty dir.
    data_dir = (args.data_dir or default_data_dir()).absolute()
    check_writable_dir(data_dir, "--data-dir")
    outcomes = prepare_tasks(
        tasks, data_dir, registry.local, on_progress=lambda t: print(f"preparing {t} ...")
    )
    for outcome in outcomes:
        print(f"{outcome.task}\t{outcome.kind}\t{outcome.prepared_dir}")
    return 0


def cmd_check_endpoints(args: argparse.Namespace, console: Console) -> int:
    from mle_world.launch.endpoints import check_endpoints

    registry = load_registry()
    config = load_paper_config(args.config or default_config_path("paper.yaml"), registry.__contains__)
    check_endpoints(endpoint_overrides(config, EndpointFlags.from_args(args)), RichDisplay(console))
    return 0
