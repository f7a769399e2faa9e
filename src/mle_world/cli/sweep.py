"""The sweep command (`run_paper.py [flags]`): flags + configs → a plan; dry run, listing or launch.

Reads flags, configs, the environment and git; writes launch.json and agent-config.yaml, then hands the
plan to a launch backend. The only place that builds the real post-trial step and endpoint checks.
"""

from __future__ import annotations

import argparse
import os
import shlex
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from rich.console import Console
from rich.table import Table

from mle_world import __version__, layout
from mle_world.cli.checks import check_writable_dir
from mle_world.cli.display import RichDisplay
from mle_world.cli.kapso import add_kapso_flags, agent_lines
from mle_world.cli.options import (
    PROG,
    Parser,
    add_endpoint_flags,
    csv_list,
    default_config_path,
    non_empty,
    path_arg,
    positive_int,
    seed_list,
)
from mle_world.cli.planning import plan_sweep, write_plan_files
from mle_world.cli.request import SweepRequest
from mle_world.errors import ConfigError, UserError
from mle_world.escapes import printable_line
from mle_world.identity import ALLOW_PROVENANCE_FLAG, check_provenance, check_sweep_identity
from mle_world.plan.config import (
    PaperConfig,
)
from mle_world.plan.runtimes.registry import DEFAULT, NAMES, RUNTIMES, image_help, listed, on_host
from mle_world.plan.sweep_plan import LaunchOptions, SweepPlan, TrialCommand
from mle_world.tasks.registry import TaskRegistry, load_registry


def build_run_parser(subcommands: Sequence[str]) -> argparse.ArgumentParser:
    p = Parser(
        prog=PROG,
        description="Plan and run MLE-World sweeps. Subcommands: " + ", ".join(subcommands) + ".",
    )
    p.add_argument("--version", action="version", version=f"mle-world {__version__}")
    g = p.add_argument_group("sweep")
    g.add_argument("--config", type=path_arg, help="paper config (default configs/paper.yaml)")
    g.add_argument("--cluster-config", type=path_arg, help="cluster config (default configs/cluster.yaml)")
    g.add_argument(
        "--regime", choices=["gated", "ungated"], help="which regime to run (default with -c: gated)"
    )
    g.add_argument(
        "--output-dir",
        type=path_arg,
        help="where launch.json, runs/ and costs/ go; re-running on it resumes (default with -c: "
        "runs/<competition>-<configuration>-<regime>)",
    )
    g.add_argument(
        "--data-dir", type=path_arg, help="prepared MLE-bench data (default ~/.cache/mle-bench/data)"
    )
    g.add_argument(
        "--competitions-dir", type=path_arg, action="append", default=[], help="extra local competitions"
    )
    g.add_argument("--tasks", type=csv_list, help="comma-separated competition ids (default: the config's)")
    g.add_argument("--configs", type=csv_list, help="comma-separated configuration names")
    g.add_argument("--seeds", type=seed_list, help="comma-separated seeds")
    g.add_argument("--grade", action="store_true", help="grade each trial after its agent exits")
    g.add_argument("--prices", type=path_arg, help="price table for cost CSVs (default configs/prices.yaml)")
    g.add_argument("--dry-run", action="store_true", help="render and record everything, execute nothing")
    g.add_argument("--summary", action="store_true", help="with --dry-run: a table instead of every command")
    g.add_argument(
        "--retry-failed",
        nargs="?",
        const="infra",
        choices=["infra", "all"],
        help="rerun failed trials: infrastructure failures (the default) or all",
    )
    g.add_argument(
        "--allow-provenance-change",
        action="store_true",
        help="continue an output dir whose earlier launch ran other code, served models, image or prepared data "
        "(recorded in launch.json; the audit flags the mix)",
    )
    add_endpoint_flags(p.add_argument_group("endpoints"))  # type: ignore[arg-type]
    r = p.add_argument_group("execution")
    r.add_argument(
        "--backend",
        choices=["local", "slurm"],
        default="local",
        help="local: a worker pool on this allocation (default); slurm: one job array through submitit",
    )
    r.add_argument(
        "--runtime",
        choices=list(NAMES),
        default=DEFAULT,
        help="; ".join(f"{name}: {runtime.summary}" for name, runtime in RUNTIMES.items()),
    )
    r.add_argument(
        "--enroot-image",
        type=path_arg,
        help=f"the AIDE image ({image_help()}; required with those)",
    )
    r.add_argument(
        "--no-sandbox",
        action="store_true",
        help=f"{listed(on_host())} runtime without bubblewrap nor the scripts' inner sandbox (unsafe; recorded)",
    )
    r.add_argument("--n-workers", type=positive_int, default=1, help="trials at once in the local pool (1)")
    r.add_argument(
        "--gpu-device",
        default=None,
        help="GPU ids for the local pool, e.g. 0,1,2,3 or 0-3, or none (default 0; with -c $CUDA_DEVICE)",
    )
    r.add_argument("--trials-per-gpu", type=positive_int, default=1, help="trials sharing one GPU (1)")
    r.add_argument("--no-progress", action="store_true", help="no live progress bar (for logs)")
    r.add_argument(
        "--no-wait",
        action="store_true",
        help="--backend slurm: submit and return, without watching the jobs (follow with `status`)",
    )
    r.add_argument("--no-endpoint-check", action="store_true", help="skip probing endpoints before launching")
    k = p.add_argument_group("one trial (Kapso-style)")
    k.add_argument("-c", "--competition", type=non_empty, help="run one competition (one trial)")
    k.add_argument(
        "-i",
        "--iterations",
        type=positive_int,
        help="max agent steps (default: the config's budget.max_steps)",
    )
    k.add_argument(
        "-m",
        "--configuration",
        type=non_empty,
        help="configuration name for -c (default: the first); Kapso's modes MLE_CONFIGS and MINIMAL pick "
        "configs/paper.yaml and configs/demo.yaml",
    )
    k.add_argument("--seed", type=int, help="seed for -c (default: $MLE_SEED, else the config's first)")
    add_kapso_flags(k)  # type: ignore[arg-type]
    lst = p.add_argument_group("listings")
    lst.add_argument("--list", action="store_true", help="list all competitions and exit")
    lst.add_argument("--lite", action="store_true", help="list MLE-bench Lite competitions and exit")
    lst.add_argument("--list-agents", action="store_true", help="list the coding agents and exit")
    return p


def _print_listing(registry: TaskRegistry, lite: bool, console: Console) -> None:
    ids = list(registry.lite) if lite else registry.all_ids()
    for task in ids:
        tag = "local" if registry.is_local(task) else "mle-bench"
        print(f"{task}\t{tag}")


def _print_dry_run(plan: SweepPlan, written: tuple[Path, Path], summary: bool, console: Console) -> None:
    if summary:
        table = Table(
            title=f"{plan.regime}: {len(plan.commands)} trials ({plan.record.runtime}, {plan.record.backend})"
        )
        for column in ("configuration", "tasks", "seeds", "trials"):
            table.add_column(column)
        by_config: dict[str, list[TrialCommand]] = {}
        for cmd in plan.commands:
            by_config.setdefault(cmd.trial.spec.configuration, []).append(cmd)
        for name, group in by_config.items():
            tasks = {c.trial.spec.task for c in group}
            seeds = sorted({c.trial.spec.seed for c in group})
            table.add_row(name, str(len(tasks)), ",".join(map(str, seeds)), str(len(group)))
        console.print(table)
    else:
        for cmd in plan.commands:
            print(f"# {cmd.trial.trial_id}  [{cmd.trial.spec.science_hash}]")
            print(cmd.command)
    print(f"dry run: {len(plan.commands)} trials; wrote {written[0]} and {written[1]}; nothing executed")


def cmd_run(args: argparse.Namespace, argv: Sequence[str], console: Console, err: Console) -> int:
    if args.list_agents:
        print("\n".join(agent_lines()))
        return 0
    registry_only = args.list or args.lite
    if registry_only:
        _print_listing(load_registry(list(args.competitions_dir)), args.lite, console)
        return 0
    # The flags are checked together once, here; nothing below reads `args`.
    request = SweepRequest.from_args(args, tuple(argv), os.environ)
    plan, config, warnings = plan_sweep(request)
    # A dry run validates every flag a real run would, before anything is written.
    options = launch_options(request)
    check_writable_dir(plan.output_dir, "--output-dir")
    if request.backend == "slurm":
        from mle_world.launch.mounts import lock_warning
        from mle_world.launch.slurm.backend import check_log_folder

        check_log_folder(plan.output_dir)
        if shared := lock_warning(plan.output_dir.absolute()):
            warnings = [*warnings, shared]
    prices_path = _load_prices_flag(request.prices)
    warnings = [*warnings, *served_gpu_warnings(config, prices_path)]
    for warning in warnings:
        line = f"WARNING: {printable_line(warning)}"
        err.print(line, style="bold red", markup=False, highlight=False, soft_wrap=True)
    if request.dry_run:
        _print_dry_run(plan, write_plan_files(plan, config), request.summary, console)
        if request.backend == "slurm":
            from mle_world.launch.slurm.backend import write_sbatch_preview

            for path in write_sbatch_preview(plan, options):
                print(f"\n# sbatch script that would be submitted ({path}):")
                print(path.read_text())
        return 0
    return execute_plan(plan, config, request, console, err, prices_path)


def _load_prices_flag(prices: Path | None) -> Path:
    """Read and validate the price table now: a bad one must not surface after trials have run."""
    from mle_world.costs.prices import load_prices

    path = (prices or default_config_path("prices.yaml")).absolute()
    try:
        load_prices(path)
    except ConfigError as exc:
        raise UserError(f"--prices: {exc}" if prices else str(exc)) from None
    return path


def served_gpu_warnings(config: PaperConfig, prices_path: Path) -> list[str]:
    """A role whose server the config starts on other GPUs than the price table charges: its self-hosted
    cost (LLM seconds x GPUs x price) would be off by that ratio."""
    from mle_world.costs.prices import load_prices

    charged = load_prices(prices_path).self_hosted
    return [
        f"{prices_path}: self_hosted.{role}.gpus is {charged[role].gpus} but the config serves {role} on "
        f"{serve.gpus} GPU(s) (serve.{role}.gpus): its self-hosted cost would be off by "
        f"{serve.gpus / charged[role].gpus:.3g}x; make them agree (--prices FILE)"
        for role, serve in sorted(config.serve.items())
        if role in charged and charged[role].gpus != serve.gpus
    ]


def launch_options(request: SweepRequest) -> LaunchOptions:
    from mle_world.launch.local.pool import parse_gpu_devices

    text = request.gpu_text
    # "none": a machine without GPUs; trials get an empty CUDA_VISIBLE_DEVICES and no GPU-hours.
    try:
        gpus = () if text.strip().lower() == "none" else parse_gpu_devices(text)
    except UserError as exc:
        if not request.gpus_from_env:
            raise
        raise UserError(
            str(exc).replace("--gpu-device", f"CUDA_DEVICE={text!r} (or --gpu-device)", 1)
        ) from None
    return LaunchOptions(
        backend=request.backend,
        n_workers=request.n_workers,
        gpu_devices=gpus,
        trials_per_gpu=request.trials_per_gpu,
        grade=request.grade,
        retry_failed=request.retry_failed,
        show_progress=not request.no_progress,
        wait=not request.no_wait,
    )


def execute_plan(
    plan: SweepPlan,
    config: PaperConfig,
    request: SweepRequest,
    console: Console,
    err: Console,
    prices: Path,
) -> int:
    """Checks (identity, data, image, endpoints), then launch.json, then the backend."""
    from mle_world.costs.summary import write_cost_summary
    from mle_world.launch.data_manifest import data_manifests
    from mle_world.launch.endpoints import check_endpoints, endpoint_records
    from mle_world.launch.launcher import run_sweep
    from mle_world.launch.post_trial import TrialFinisher
    from mle_world.launch.preflight import (
        check_container_runtime,
        check_grading,
        check_host_gpus,
        check_prepared,
    )

    options = launch_options(request)
    gpu_flag = "CUDA_DEVICE=" if request.gpus_from_env else "--gpu-device "
    check_host_gpus(plan.runtime, request.backend, options.gpu_devices, gpu_flag)
    check_sweep_identity(plan.output_dir, plan.config_hash, plan.regime)
    check_prepared([r.trial for r in plan.commands], plan.data_dir, plan.local_competitions)
    grader = None
    if request.grade:
        grader = check_grading([r.trial for r in plan.commands], plan.data_dir, plan.local_competitions)
    record = plan.record.model_copy(
        update={
            "data_manifests": data_manifests([r.trial for r in plan.commands]),
            "mlebench_version": grader,
        }
    )
    image_sha256 = check_container_runtime(plan.runtime, request.backend)
    if image_sha256 is not None:
        record = record.model_copy(update={"image_sha256": image_sha256})
    if request.no_endpoint_check:
        err.print("WARNING: --no-endpoint-check: endpoints not probed", highlight=False)
    else:
        probes = check_endpoints(dict(config.endpoints), RichDisplay(console), prefix="launch")
        record = record.model_copy(update={"endpoints": endpoint_records(config.endpoints, probes)})
    plan = replace(plan, record=record)

    def check_launch() -> None:
        # Under the launcher lock: a running launcher may be rewriting launch.json.
        for change in check_provenance(
            plan.output_dir / layout.LAUNCH, record, request.allow_provenance_change
        ):
            err.print(
                f"WARNING: {ALLOW_PROVENANCE_FLAG}: {printable_line(change)}", highlight=False, markup=False
            )

    from mle_world.audit.digest import write_trial_digest
    from mle_world.audit.digest_files import gather_digests

    finisher = TrialFinisher(
        plan.output_dir, plan.data_dir, prices, request.grade, plan.local_competitions, write_trial_digest
    )
    # launch.json is written under the launcher lock: a launcher refused by it writes nothing.
    code = run_sweep(
        plan,
        options,
        post_trial=finisher,
        display=RichDisplay(err),
        before_launch=lambda: write_plan_files(plan, config),
        check_launch=check_launch,
    )
    write_cost_summary(plan.output_dir)
    gather_digests(plan.output_dir)  # what a first audit reads: one file per configuration
    if code == 1:
        _say_next(plan.output_dir, err)
    return code


def _say_next(output_dir: Path, err: Console) -> None:
    """After a launch whose trials failed: where to look, and the exact command that reruns them."""
    from mle_world.launch.state import utcnow
    from mle_world.launch.sweep_state import read_sweep_status
    from mle_world.launch.sweep_summary import summarise

    summary = summarise(output_dir, read_sweep_status(output_dir), utcnow())
    lines = [f"failures by cause: {shlex.join(['python', 'run_paper.py', 'status', str(output_dir)])}"]
    for line in (*lines, *summary.next_commands):
        err.print(f"[launch] next: {printable_line(line)}", markup=False, highlight=False, soft_wrap=True)
