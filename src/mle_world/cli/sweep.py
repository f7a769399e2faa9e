"""The sweep command (`run_paper.py [flags]`): flags + configs → a plan; dry run, listing or launch.

Reads flags, configs, the environment and git; writes launch.json and agent-config.yaml, then hands the
plan to a launch backend. The only place that builds the real post-trial step and endpoint checks.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import yaml
from rich.console import Console
from rich.table import Table

from mle_world import __version__
from mle_world.cli.checks import check_writable_dir, ensure_dir
from mle_world.cli.display import RichDisplay
from mle_world.cli.options import (
    PROG,
    Parser,
    add_endpoint_flags,
    csv_list,
    default_config_path,
    default_data_dir,
    endpoint_overrides,
    positive_int,
    seed_list,
)
from mle_world.errors import ConfigError, UserError
from mle_world.identity import check_sweep_identity
from mle_world.plan.config import (
    PaperConfig,
    load_cluster_config,
    load_paper_config,
    regime_hash,
    resolved_regime,
)
from mle_world.plan.render import RUNTIMES, Renderer, RuntimeSpec, render_command, view_paths
from mle_world.plan.sweep import Selection, expand
from mle_world.plan.sweep_plan import LaunchOptions, PlannedRun, SweepPlan
from mle_world.records import (
    EndpointRecord,
    EndpointSettings,
    LaunchedTrial,
    LaunchRecord,
    Regime,
    Role,
)
from mle_world.storage import write_model, write_text_atomic
from mle_world.tasks.registry import TaskRegistry, load_registry

NO_SANDBOX_WARNING = (
    "--no-sandbox: the agent and its generated code run unsandboxed with the host filesystem in view; "
    "private answers under --data-dir are readable. Results are not valid for the paper."
)


def build_run_parser(subcommands: Sequence[str]) -> argparse.ArgumentParser:
    p = Parser(
        prog=PROG,
        description="Plan and run MLE-World sweeps. Subcommands: " + ", ".join(subcommands) + ".",
    )
    p.add_argument("--version", action="version", version=f"mle-world {__version__}")
    g = p.add_argument_group("sweep")
    g.add_argument("--config", type=Path, help="paper config (default configs/paper.yaml)")
    g.add_argument("--cluster-config", type=Path, help="cluster config (default configs/cluster.yaml)")
    g.add_argument("--regime", choices=["gated", "ungated"])
    g.add_argument("--output-dir", type=Path)
    g.add_argument("--data-dir", type=Path, help="prepared MLE-bench data (default ~/.cache/mle-bench/data)")
    g.add_argument(
        "--competitions-dir", type=Path, action="append", default=[], help="extra local competitions"
    )
    g.add_argument("--tasks", type=csv_list, help="comma-separated competition ids (default: the config's)")
    g.add_argument("--configs", type=csv_list, help="comma-separated configuration names")
    g.add_argument("--seeds", type=seed_list, help="comma-separated seeds")
    g.add_argument("--grade", action="store_true", help="grade each trial after its agent exits")
    g.add_argument("--prices", type=Path, help="price table for cost CSVs (default configs/prices.yaml)")
    g.add_argument("--dry-run", action="store_true", help="render and record everything, execute nothing")
    g.add_argument("--summary", action="store_true", help="with --dry-run: a table instead of every command")
    g.add_argument("--retry-failed", nargs="?", const="infra", choices=["infra", "all"])
    add_endpoint_flags(p.add_argument_group("endpoints"))  # type: ignore[arg-type]
    r = p.add_argument_group("execution")
    r.add_argument("--backend", choices=["local", "slurm"], default="local")
    r.add_argument("--runtime", choices=list(RUNTIMES), default="enroot")
    r.add_argument("--enroot-image", type=Path)
    r.add_argument("--no-sandbox", action="store_true", help="process runtime without bubblewrap (unsafe)")
    r.add_argument("--n-workers", type=positive_int, default=1)
    r.add_argument("--gpu-device", default=None, help="GPU ids for the local pool, e.g. 0,1,2,3 or 0-3")
    r.add_argument("--trials-per-gpu", type=positive_int, default=1)
    r.add_argument("--no-progress", action="store_true")
    r.add_argument("--no-endpoint-check", action="store_true", help="skip probing endpoints before launching")
    k = p.add_argument_group("one trial (Kapso-style)")
    k.add_argument("-c", "--competition", help="run one competition (one trial)")
    k.add_argument("-i", "--iterations", type=positive_int, help="max agent steps")
    k.add_argument("-m", "--configuration", help="configuration name for -c (default: the first)")
    k.add_argument("--seed", type=int, help="seed for -c (default: $MLE_SEED, else the config's first)")
    lst = p.add_argument_group("listings")
    lst.add_argument("--list", action="store_true", help="list all competitions and exit")
    lst.add_argument("--lite", action="store_true", help="list MLE-bench Lite competitions and exit")
    return p


def _print_listing(registry: TaskRegistry, lite: bool, console: Console) -> None:
    ids = list(registry.lite) if lite else registry.all_ids()
    for task in ids:
        tag = "local" if registry.is_local(task) else "mle-bench"
        print(f"{task}\t{tag}")


def _git_sha() -> str | None:
    """The commit of the checkout the package runs from; None for an installed copy (or without git)."""
    import mle_world

    package = Path(mle_world.__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "-C", str(package), "rev-parse", "--show-toplevel", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = out.stdout.split()
    if out.returncode != 0 or len(lines) != 2 or Path(lines[0]) / "src" / "mle_world" != package:
        return None
    return lines[1]


def check_seeds(seeds: tuple[int, ...], known: tuple[int, ...]) -> None:
    """--seeds selects among the config's seeds; a new seed belongs in the config (and its identity)."""
    if not seeds:
        raise UserError("--seeds: no seed given (expected e.g. --seeds 34,35)")
    unknown = [s for s in seeds if s not in known]
    if unknown:
        raise UserError(
            f"--seeds: {', '.join(map(str, unknown))} not among the config's seeds "
            f"({', '.join(map(str, known))}); add new seeds to `seeds:` in the config"
        )


def _runtime(
    args: argparse.Namespace,
    endpoints: dict[Role, EndpointSettings],
    cluster_env: tuple[str, ...],
    mounts: tuple[tuple[str, str], ...] = (),
) -> RuntimeSpec:
    names = ["CUDA_VISIBLE_DEVICES"]
    names += [e.key_env for e in endpoints.values() if e.key_env and e.key_env not in names]
    names += [n for n in cluster_env if n not in names]
    if args.runtime != "process":
        return RuntimeSpec(
            runtime=args.runtime,
            image=str(args.enroot_image.absolute()) if args.enroot_image else None,
            env_names=tuple(names),
            mounts=mounts,
        )
    import mle_world

    package_root = Path(mle_world.__file__).resolve().parents[1]
    prefixes = sorted({sys.prefix, sys.base_prefix, str(package_root)})
    python_bin = str(Path(sys.executable).parent)
    return RuntimeSpec(
        runtime="process",
        sandbox=not args.no_sandbox,
        python=sys.executable,
        host_paths=tuple(prefixes),
        env_names=tuple(names),
        path_env=f"{python_bin}:/usr/local/bin:/usr/bin:/bin",
        mounts=mounts,
    )


def _selection(args: argparse.Namespace, config: PaperConfig) -> tuple[Selection, Regime]:
    """The trials the flags select; `-c COMPETITION` is one trial (seed from --seed, $MLE_SEED, or the first)."""
    regime: Regime | None = args.regime
    if args.competition:
        seed = args.seed
        if seed is None and os.environ.get("MLE_SEED"):
            try:
                seed = int(os.environ["MLE_SEED"])
            except ValueError:
                raise UserError(f"MLE_SEED={os.environ['MLE_SEED']!r} is not an integer") from None
        configuration = args.configuration or next(iter(config.configurations))
        selection = Selection(
            tasks=(args.competition,),
            configurations=(configuration,),
            seeds=(seed if seed is not None else config.seeds[0],),
            max_steps=args.iterations,
        )
        return selection, regime or "gated"
    if args.configuration or args.seed is not None:
        raise UserError(
            "-m/--configuration and --seed need -c COMPETITION (use --configs/--seeds for sweeps)"
        )
    if regime is None:
        raise UserError("--regime is required (gated or ungated)")
    if args.seeds is not None:
        check_seeds(args.seeds, config.seeds)
    selection = Selection(
        tasks=args.tasks, configurations=args.configs, seeds=args.seeds, max_steps=args.iterations
    )
    return selection, regime


def _output_dir(args: argparse.Namespace, selection: Selection, regime: Regime) -> Path:
    """--output-dir, or for `-c` runs/<competition>-<configuration>-<regime>."""
    if args.output_dir is not None:
        return Path(args.output_dir).absolute()
    if not args.competition or not selection.configurations:
        raise UserError("--output-dir is required")
    return (Path("runs") / f"{args.competition}-{selection.configurations[0]}-{regime}").absolute()


def plan_from_args(args: argparse.Namespace, argv: Sequence[str]) -> tuple[SweepPlan, PaperConfig, list[str]]:
    """Resolve flags + configs into a SweepPlan (pure apart from reading configs, the environment and
    git; `args` is not changed)."""
    registry = load_registry(list(args.competitions_dir))
    config_path = args.config or default_config_path("paper.yaml")
    config = load_paper_config(config_path, registry.__contains__)
    cluster_path = args.cluster_config or default_config_path("cluster.yaml")
    cluster = load_cluster_config(cluster_path if (args.cluster_config or cluster_path.exists()) else None)

    warnings: list[str] = []
    selection, regime = _selection(args, config)
    if args.competition and selection.seeds and selection.seeds[0] not in config.seeds:
        # A one-off seed (Kapso's MLE_SEED defaults to 1) is part of the sweep's identity, so a
        # later run with the config's seeds cannot mix into the same output dir unnoticed.
        config = replace(config, seeds=selection.seeds)
    output_dir = _output_dir(args, selection, regime)
    if args.no_sandbox:
        if args.runtime != "process":
            raise UserError("--no-sandbox applies to --runtime process only")
        warnings.append(NO_SANDBOX_WARNING)
    if args.summary and not args.dry_run:
        raise UserError("--summary needs --dry-run")

    data_dir = (args.data_dir or default_data_dir()).absolute()
    endpoints = endpoint_overrides(config, args)
    config = replace(config, endpoints=endpoints)
    runtime = _runtime(args, endpoints, cluster.container.env, cluster.container.mount_pairs())

    trials = expand(
        config,
        regime,
        selection,
        output_dir=output_dir,
        data_dir=data_dir,
        known_task=registry.__contains__,
        view=lambda trial_dir, public: view_paths(runtime, trial_dir, public),
        direction=registry.lower_is_better,
    )
    renderer = Renderer()
    runs = tuple(PlannedRun(trial=t, command=render_command(t, runtime, renderer)) for t in trials)
    # The identity of an output dir is the whole regime's science, not the filtered subset, so a
    # later `--configs`/`--tasks` run on the same dir is accepted; spec.json hashes guard each trial.
    config_hash = regime_hash(config, regime, tuple(config.configurations))
    record = LaunchRecord(
        argv=tuple(argv),
        harness_version=__version__,
        git_sha=_git_sha(),
        created_at=datetime.now(UTC),
        regime=regime,
        config_path=str(config.path.absolute()),
        config_hash=config_hash,
        cluster_path=str(cluster_path.absolute()) if cluster_path.exists() else None,
        backend=args.backend,
        runtime=args.runtime,
        dry_run=bool(args.dry_run),
        sandbox=runtime.sandbox,
        warnings=tuple(warnings),
        data_dir=str(data_dir),
        image_path=runtime.image,
        endpoints_file=str(args.endpoints_file.absolute()) if args.endpoints_file else None,
        endpoints=tuple(
            EndpointRecord(role=role, url=url, key_env=e.key_env, served_models=(e.model,) if e.model else ())
            for role, e in endpoints.items()
            for url in e.urls
        ),
        trials=tuple(
            LaunchedTrial(
                trial_id=r.trial.trial_id,
                science_hash=r.trial.spec.science_hash,
                trial_dir=str(r.trial.trial_dir),
                command=r.command,
            )
            for r in runs
        ),
    )
    plan = SweepPlan(
        output_dir=output_dir,
        data_dir=data_dir,
        regime=regime,
        runs=runs,
        runtime=runtime,
        cluster=cluster,
        record=record,
        config_hash=config_hash,
        local_competitions=dict(registry.local),
    )
    return plan, config, warnings


def write_plan_files(plan: SweepPlan, config: PaperConfig) -> Path:
    """launch.json + agent-config.yaml; a dry run never overwrites a real run's launch.json."""
    out = ensure_dir(plan.output_dir, "--output-dir")
    launch_path = out / "launch.json"
    if plan.record.dry_run and launch_path.exists():
        try:
            previous = LaunchRecord.model_validate_json(launch_path.read_text())
            if not previous.dry_run:
                launch_path = out / "launch.dry-run.json"
        except ValueError:
            launch_path = out / "launch.dry-run.json"
    resolved = resolved_regime(config, plan.regime, tuple(config.configurations))
    resolved["config_hash"] = plan.config_hash
    # libyaml's emitter when available: the same text as safe_dump, several times faster.
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    text = yaml.dump(resolved, Dumper=dumper, sort_keys=False, width=110)
    write_text_atomic(out / "agent-config.yaml", text)
    write_model(launch_path, plan.record)
    return launch_path


def _print_dry_run(plan: SweepPlan, launch_path: Path, summary: bool, console: Console) -> None:
    if summary:
        table = Table(
            title=f"{plan.regime}: {len(plan.runs)} trials ({plan.record.runtime}, {plan.record.backend})"
        )
        for column in ("configuration", "tasks", "seeds", "trials"):
            table.add_column(column)
        by_config: dict[str, list[PlannedRun]] = {}
        for run in plan.runs:
            by_config.setdefault(run.trial.spec.configuration, []).append(run)
        for name, runs in by_config.items():
            tasks = {r.trial.spec.task for r in runs}
            seeds = sorted({r.trial.spec.seed for r in runs})
            table.add_row(name, str(len(tasks)), ",".join(map(str, seeds)), str(len(runs)))
        console.print(table)
    else:
        for run in plan.runs:
            print(f"# {run.trial.trial_id}  [{run.trial.spec.science_hash}]")
            print(run.command)
    print(
        f"dry run: {len(plan.runs)} trials; wrote {launch_path} and {plan.output_dir / 'agent-config.yaml'}; "
        "nothing executed"
    )


def cmd_run(args: argparse.Namespace, argv: Sequence[str], console: Console, err: Console) -> int:
    registry_only = args.list or args.lite
    if registry_only:
        _print_listing(load_registry(list(args.competitions_dir)), args.lite, console)
        return 0
    plan, config, warnings = plan_from_args(args, argv)
    # A dry run validates every flag a real run would, before anything is written.
    options = launch_options(args)
    check_writable_dir(plan.output_dir, "--output-dir")
    prices_path = _load_prices_flag(args)
    for warning in warnings:
        err.print(f"WARNING: {warning}", style="bold red", highlight=False)
    if args.dry_run:
        launch_path = write_plan_files(plan, config)
        _print_dry_run(plan, launch_path, args.summary, console)
        if args.backend == "slurm":
            from mle_world.launch.run import write_sbatch_preview

            for path in write_sbatch_preview(plan, options):
                print(f"\n# sbatch script that would be submitted ({path}):")
                print(path.read_text())
        return 0
    return execute_plan(plan, config, args, console, err, prices_path)


def _load_prices_flag(args: argparse.Namespace) -> Path:
    """Read and validate the price table now: a bad one must not surface after trials have run."""
    from mle_world.costs.prices import load_prices

    path = (args.prices or default_config_path("prices.yaml")).absolute()
    try:
        load_prices(path)
    except ConfigError as exc:
        raise UserError(f"--prices: {exc}" if args.prices else str(exc)) from None
    return path


def launch_options(args: argparse.Namespace) -> LaunchOptions:
    from mle_world.launch.local import parse_gpu_devices

    text = args.gpu_device
    if text is None:
        # One-trial runs (`-c`) honour $CUDA_DEVICE like the Kapso-style scripts they replace.
        text = os.environ.get("CUDA_DEVICE") or "0" if args.competition else "0"
    # "none": a machine without GPUs; trials get an empty CUDA_VISIBLE_DEVICES and no GPU-hours.
    gpus = () if text.strip().lower() == "none" else parse_gpu_devices(text)
    return LaunchOptions(
        backend=args.backend,
        n_workers=args.n_workers,
        gpu_devices=gpus,
        trials_per_gpu=args.trials_per_gpu,
        grade=args.grade,
        retry_failed=args.retry_failed,
        show_progress=not args.no_progress,
    )


def execute_plan(
    plan: SweepPlan,
    config: PaperConfig,
    args: argparse.Namespace,
    console: Console,
    err: Console,
    prices: Path,
) -> int:
    """Checks (identity, data, image, endpoints), then launch.json, then the backend."""
    from mle_world.costs.summary import write_cost_summary
    from mle_world.launch.endpoints import check_endpoints, endpoint_records
    from mle_world.launch.image import verify_image
    from mle_world.launch.post_trial import TrialFinisher
    from mle_world.launch.run import check_prepared, run_sweep

    options = launch_options(args)
    check_sweep_identity(plan.output_dir, plan.config_hash)
    check_prepared([r.trial for r in plan.runs], plan.data_dir, plan.local_competitions)
    record = plan.record
    if plan.runtime.runtime in ("enroot", "pyxis") and plan.runtime.image:
        info = verify_image(plan.runtime.image)
        record = record.model_copy(update={"image_sha256": info.sha256})
    if args.no_endpoint_check:
        err.print("WARNING: --no-endpoint-check: endpoints not probed", highlight=False)
    else:
        probes = check_endpoints(dict(config.endpoints), RichDisplay(console), prefix="launch")
        record = record.model_copy(update={"endpoints": endpoint_records(config.endpoints, probes)})
    plan = replace(plan, record=record)
    write_plan_files(plan, config)
    finisher = TrialFinisher(plan.output_dir, plan.data_dir, prices, args.grade, plan.local_competitions)
    code = run_sweep(plan, options, post_trial=finisher, display=RichDisplay(err))
    write_cost_summary(plan.output_dir)
    return code
