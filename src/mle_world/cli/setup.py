"""Setup commands: `prepare` (competition data) and `check-endpoints` (probe the three roles).

Reads configs, the environment and the endpoints; `prepare` writes prepared data under --data-dir. Prints.
"""

from __future__ import annotations

import argparse

from rich.console import Console

from mle_world.cli.checks import check_writable_dir
from mle_world.cli.display import RichDisplay
from mle_world.cli.options import (
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
    p.add_argument("--config", type=path_arg)
    p.add_argument("--data-dir", type=path_arg)
    p.add_argument("--tasks", type=csv_list, help="comma-separated ids (default: the config's task list)")
    p.add_argument("--competitions-dir", type=path_arg, action="append", default=[])


def add_check_endpoints_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", type=path_arg)
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
    check_endpoints(endpoint_overrides(config, args), RichDisplay(console))
    return 0
