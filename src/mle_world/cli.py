"""Command-line entry point: `run_paper.py` / `mle-world` (sweeps, dry runs, status, grade, audit, prepare).

Reads flags, configs and the environment; writes launch.json and agent-config.yaml, then hands the
plan to a launch backend. The only module that builds real implementations of the plug-in points.
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
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from mle_world import __version__
from mle_world.config import (
    PaperConfig,
    load_cluster_config,
    load_paper_config,
    regime_hash,
    resolved_regime,
)
from mle_world.errors import UserError
from mle_world.plan import LaunchOptions, PlannedRun, SweepPlan
from mle_world.records import (
    ROLES,
    EndpointRecord,
    EndpointSettings,
    LaunchedTrial,
    LaunchRecord,
    Regime,
    Role,
)
from mle_world.render import RUNTIMES, Renderer, RuntimeSpec, render_command, view_paths
from mle_world.storage import write_model, write_text_atomic
from mle_world.sweep import Selection, expand
from mle_world.tasks import TaskRegistry, load_registry

PROG = "run_paper.py"
SUBCOMMANDS = ("status", "audit", "show", "grade", "prepare", "check-endpoints")
NO_SANDBOX_WARNING = (
    "--no-sandbox: the agent and its generated code run unsandboxed with the host filesystem in view; "
    "private answers under --data-dir are readable. Results are not valid for the paper."
)


def repo_root() -> Path:
    """The checkout root when running from a source tree (configs/ lives there)."""
    return Path(__file__).resolve().parents[2]


def default_config_path(name: str) -> Path:
    local = Path("configs") / name
    return local if local.exists() else repo_root() / "configs" / name


def default_data_dir() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "mle-bench" / "data"


def _csv(text: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in text.split(",") if item.strip())


def _seeds(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(item) for item in _csv(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


class _Parser(argparse.ArgumentParser):
    """argparse that reports errors as one line with exit code 2 (its default code, kept)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UserError(message)


def build_run_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog=PROG,
        description="Plan and run MLE-World sweeps. Subcommands: " + ", ".join(SUBCOMMANDS) + ".",
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
    g.add_argument("--tasks", type=_csv, help="comma-separated competition ids (default: the config's)")
    g.add_argument("--configs", type=_csv, help="comma-separated configuration names")
    g.add_argument("--seeds", type=_seeds, help="comma-separated seeds")
    g.add_argument("--grade", action="store_true", help="grade each trial after its agent exits")
    g.add_argument("--prices", type=Path, help="price table for cost CSVs (default configs/prices.yaml)")
    g.add_argument("--dry-run", action="store_true", help="render and record everything, execute nothing")
    g.add_argument("--summary", action="store_true", help="with --dry-run: a table instead of every command")
    g.add_argument("--retry-failed", nargs="?", const="infra", choices=["infra", "all"])
    _endpoint_flags(p.add_argument_group("endpoints"))  # type: ignore[arg-type]
    r = p.add_argument_group("execution")
    r.add_argument("--backend", choices=["local", "slurm"], default="local")
    r.add_argument("--runtime", choices=list(RUNTIMES), default="enroot")
    r.add_argument("--enroot-image", type=Path)
    r.add_argument("--no-sandbox", action="store_true", help="process runtime without bubblewrap (unsafe)")
    r.add_argument("--n-workers", type=_positive, default=1)
    r.add_argument("--gpu-device", default=None, help="GPU ids for the local pool, e.g. 0,1,2,3 or 0-3")
    r.add_argument("--trials-per-gpu", type=_positive, default=1)
    r.add_argument("--no-progress", action="store_true")
    r.add_argument("--no-endpoint-check", action="store_true", help="skip probing endpoints before launching")
    k = p.add_argument_group("one trial (Kapso-style)")
    k.add_argument("-c", "--competition", help="run one competition (one trial)")
    k.add_argument("-i", "--iterations", type=_positive, help="max agent steps")
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


def _endpoints(config: PaperConfig, args: argparse.Namespace) -> dict[Role, EndpointSettings]:
    out: dict[Role, EndpointSettings] = {}
    for role in ROLES:
        update: dict[str, object] = {}
        if getattr(args, f"{role}_url"):
            update["url"] = getattr(args, f"{role}_url")
        if getattr(args, f"{role}_model"):
            update["model"] = getattr(args, f"{role}_model")
        # Validated, not copied: a comma-separated --ROLE-url is a list of replicas.
        try:
            out[role] = EndpointSettings.model_validate({**config.endpoints[role].model_dump(), **update})
        except ValidationError as error:
            raise UserError(f"--{role}-url: {error.errors()[0]['msg']}") from None
    return out


def _git_sha() -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(repo_root()), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def _runtime(
    args: argparse.Namespace, endpoints: dict[Role, EndpointSettings], cluster_env: tuple[str, ...]
) -> RuntimeSpec:
    names = ["CUDA_VISIBLE_DEVICES"]
    names += [e.key_env for e in endpoints.values() if e.key_env and e.key_env not in names]
    names += [n for n in cluster_env if n not in names]
    if args.runtime != "process":
        return RuntimeSpec(
            runtime=args.runtime,
            image=str(args.enroot_image.absolute()) if args.enroot_image else None,
            env_names=tuple(names),
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
    )


def plan_from_args(args: argparse.Namespace, argv: Sequence[str]) -> tuple[SweepPlan, PaperConfig, list[str]]:
    """Resolve flags + configs into a SweepPlan (pure apart from reading configs and git)."""
    registry = load_registry(list(args.competitions_dir))
    config_path = args.config or default_config_path("paper.yaml")
    config = load_paper_config(config_path, registry.__contains__)
    cluster_path = args.cluster_config or default_config_path("cluster.yaml")
    cluster = load_cluster_config(cluster_path if (args.cluster_config or cluster_path.exists()) else None)

    warnings: list[str] = []
    selection = Selection(
        tasks=args.tasks, configurations=args.configs, seeds=args.seeds, max_steps=args.iterations
    )
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
        regime = regime or "gated"
        if args.gpu_device is None and os.environ.get("CUDA_DEVICE"):
            args.gpu_device = os.environ["CUDA_DEVICE"]
    elif args.configuration or args.seed is not None:
        raise UserError(
            "-m/--configuration and --seed need -c COMPETITION (use --configs/--seeds for sweeps)"
        )
    if regime is None:
        raise UserError("--regime is required (gated or ungated)")
    if args.output_dir is None:
        if not args.competition:
            raise UserError("--output-dir is required")
        args.output_dir = Path("runs") / f"{args.competition}-{selection.configurations[0]}-{regime}"  # type: ignore[index]
    if args.no_sandbox:
        if args.runtime != "process":
            raise UserError("--no-sandbox applies to --runtime process only")
        warnings.append(NO_SANDBOX_WARNING)
    if args.summary and not args.dry_run:
        raise UserError("--summary needs --dry-run")

    output_dir = args.output_dir.absolute()
    data_dir = (args.data_dir or default_data_dir()).absolute()
    endpoints = _endpoints(config, args)
    config = replace(config, endpoints=endpoints)
    runtime = _runtime(args, endpoints, cluster.container.env)

    trials = expand(
        config,
        regime,
        selection,
        output_dir=output_dir,
        data_dir=data_dir,
        known_task=registry.__contains__,
        view=lambda trial_dir, public: view_paths(runtime, trial_dir, public),
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
    out = plan.output_dir
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
    write_text_atomic(out / "agent-config.yaml", yaml.safe_dump(resolved, sort_keys=False, width=110))
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
    for warning in warnings:
        err.print(f"WARNING: {warning}", style="bold red", highlight=False)
    if args.dry_run:
        launch_path = write_plan_files(plan, config)
        _print_dry_run(plan, launch_path, args.summary, console)
        if args.backend == "slurm":
            from mle_world.launch.run import write_sbatch_preview

            for path in write_sbatch_preview(plan, _launch_options(args)):
                print(f"\n# sbatch script that would be submitted ({path}):")
                print(path.read_text())
        return 0
    return execute_plan(plan, config, args, console, err)


def _launch_options(args: argparse.Namespace) -> LaunchOptions:
    from mle_world.launch.local import parse_gpu_devices

    text = args.gpu_device if args.gpu_device is not None else "0"
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
    plan: SweepPlan, config: PaperConfig, args: argparse.Namespace, console: Console, err: Console
) -> int:
    """Checks (identity, data, image, endpoints), then launch.json, then the backend."""
    from mle_world.costs import write_cost_summary
    from mle_world.endpoints import check_endpoints, endpoint_records
    from mle_world.finisher import TrialFinisher
    from mle_world.image import verify_image
    from mle_world.launch.run import check_identity, check_prepared, run_sweep

    options = _launch_options(args)
    check_identity(plan.output_dir, plan.config_hash)
    check_prepared([r.trial for r in plan.runs], plan.data_dir, plan.local_competitions)
    record = plan.record
    if plan.runtime.runtime in ("enroot", "pyxis") and plan.runtime.image:
        info = verify_image(plan.runtime.image)
        record = record.model_copy(update={"image_sha256": info.sha256})
    if args.no_endpoint_check:
        err.print("WARNING: --no-endpoint-check: endpoints not probed", highlight=False)
    else:
        probes = check_endpoints(dict(config.endpoints), console, prefix="launch")
        record = record.model_copy(update={"endpoints": endpoint_records(config.endpoints, probes)})
    plan = replace(plan, record=record)
    write_plan_files(plan, config)
    prices = args.prices or default_config_path("prices.yaml")
    finisher = TrialFinisher(
        plan.output_dir, plan.data_dir, prices.absolute(), args.grade, plan.local_competitions
    )
    code = run_sweep(plan, options, post_trial=finisher, console=err)
    write_cost_summary(plan.output_dir)
    return code


def _endpoint_flags(parser: argparse.ArgumentParser) -> None:
    for role in ROLES:
        parser.add_argument(
            f"--{role}-url", help=f"{role} endpoint base URL, or several replicas' URLs separated by commas"
        )
        parser.add_argument(f"--{role}-model", help=f"{role} served model id (default: discovered)")


def build_sub_parser(command: str) -> argparse.ArgumentParser:
    p = _Parser(prog=f"{PROG} {command}")
    if command == "status":
        p.add_argument("output_dir", type=Path, metavar="OUTPUT_DIR")
        p.add_argument(
            "--watch", action="store_true", help="redraw in place until every trial finished (Ctrl-C leaves)"
        )
        p.add_argument("--interval", type=_positive_float, default=5.0, help="seconds between redraws (5)")
    elif command == "audit":
        p.add_argument("output_dirs", type=Path, nargs="+", metavar="OUTPUT_DIR")
        p.add_argument("--strict", action="store_true", help="exit 1 if anything is missing or invalid")
        p.add_argument("--pad-missing", action="store_true", help="count missing seeds as failures")
        p.add_argument("--out", type=Path, help="where audit/ goes (default: the first OUTPUT_DIR)")
        p.add_argument(
            "--no-trial-pages", action="store_true", help="write index.html without a page per trial"
        )
    elif command == "show":
        p.add_argument("trial_dir", type=Path, metavar="TRIAL_DIR")
        p.add_argument("--out", type=Path, help="where the page goes (default: TRIAL_DIR/trial.html)")
    elif command == "grade":
        p.add_argument("output_dir", type=Path, metavar="OUTPUT_DIR")
        p.add_argument("--data-dir", type=Path)
        p.add_argument("--competitions-dir", type=Path, action="append", default=[])
        p.add_argument("--missing-only", action="store_true", help="keep existing reports")
        p.add_argument("--prices", type=Path, help="price table (default configs/prices.yaml)")
    elif command == "prepare":
        p.add_argument("--config", type=Path)
        p.add_argument("--data-dir", type=Path)
        p.add_argument("--tasks", type=_csv, help="comma-separated ids (default: the config's task list)")
        p.add_argument("--competitions-dir", type=Path, action="append", default=[])
    elif command == "check-endpoints":
        p.add_argument("--config", type=Path)
        _endpoint_flags(p)
    return p


def cmd_grade(args: argparse.Namespace, console: Console) -> int:
    from mle_world.costs import cost_output_dir, load_prices
    from mle_world.grading import grade_output_dir

    prices = load_prices(args.prices or default_config_path("prices.yaml"))
    registry = load_registry(list(args.competitions_dir))
    data_dir = (args.data_dir or default_data_dir()).absolute()
    result = grade_output_dir(args.output_dir, data_dir, registry.local, force=not args.missing_only)
    for report in result.graded:
        score = "invalid" if not report.valid_submission else f"{report.score}"
        medal = (
            "gold"
            if report.gold_medal
            else "silver"
            if report.silver_medal
            else ("bronze" if report.bronze_medal else "-")
        )
        print(f"{report.trial_id}\tscore={score}\tmedal={medal}")
    for line in result.errors:
        print(f"error: {line}", file=sys.stderr)
    cost_output_dir(args.output_dir, prices)
    print(f"graded {len(result.graded)}, kept {len(result.skipped)}, errors {len(result.errors)}")
    return 1 if result.errors else 0


def cmd_prepare(args: argparse.Namespace, console: Console) -> int:
    from mle_world.preparation import prepare_tasks

    registry = load_registry(list(args.competitions_dir))
    if args.tasks:
        tasks = list(args.tasks)
        for task in tasks:
            if task not in registry:
                raise UserError(f"--tasks: unknown task id '{task}' (see `run_paper.py --list`)")
    else:
        config = load_paper_config(args.config or default_config_path("paper.yaml"), registry.__contains__)
        tasks = list(config.tasks)
    data_dir = (args.data_dir or default_data_dir()).absolute()
    outcomes = prepare_tasks(
        tasks, data_dir, registry.local, on_progress=lambda t: print(f"preparing {t} ...")
    )
    for outcome in outcomes:
        print(f"{outcome.task}\t{outcome.kind}\t{outcome.prepared_dir}")
    return 0


def cmd_check_endpoints(args: argparse.Namespace, console: Console) -> int:
    from mle_world.endpoints import check_endpoints

    registry = load_registry()
    config = load_paper_config(args.config or default_config_path("paper.yaml"), registry.__contains__)
    check_endpoints(_endpoints(config, args), console)
    return 0


def cmd_audit(args: argparse.Namespace, console: Console) -> int:
    from mle_world.audit import run_audit

    dirs = [d.absolute() for d in args.output_dirs]
    return run_audit(
        dirs,
        strict=args.strict,
        pad_missing=args.pad_missing,
        console=console,
        out_dir=args.out,
        trial_pages=not args.no_trial_pages,
    )


def cmd_show(args: argparse.Namespace, console: Console) -> int:
    from mle_world.audit.pages import write_trial_page
    from mle_world.audit.trialview import load_trial_view

    trial_dir = args.trial_dir.absolute()
    if not trial_dir.is_dir():
        raise UserError(f"show: {args.trial_dir}: no such directory")
    if not any(
        (trial_dir / name).is_file()
        for name in ("journal.json", "journal.jsonl", "events.jsonl", "status.json", "spec.json")
    ):
        raise UserError(
            f"show: {args.trial_dir}: not a trial dir (no journal.json, events.jsonl, status.json or spec.json)"
        )
    out = (args.out or trial_dir / "trial.html").absolute()
    try:
        write_trial_page(load_trial_view(trial_dir), out)
    except OSError as exc:
        raise UserError(f"show: cannot write {out}: {exc.strerror or exc}") from exc
    console.print(out.as_uri(), markup=False, highlight=False)
    return 0


def dispatch(command: str, rest: list[str], console: Console) -> int:
    args = build_sub_parser(command).parse_args(rest)
    if command == "status":
        from mle_world.launch.status import show_status, watch_status

        if not args.output_dir.is_dir():
            raise UserError(f"status: {args.output_dir}: no such directory")
        if args.watch:
            return watch_status(args.output_dir.absolute(), console, args.interval)
        return show_status(args.output_dir.absolute(), console)
    if command == "audit":
        return cmd_audit(args, console)
    if command == "show":
        return cmd_show(args, console)
    if command == "grade":
        return cmd_grade(args, console)
    if command == "prepare":
        return cmd_prepare(args, console)
    if command == "check-endpoints":
        return cmd_check_endpoints(args, console)
    raise UserError(f"{PROG} {command}: not available yet in this version")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: user errors print one line and return 2; Ctrl-C returns 130."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # Piped output (CI logs, `| tee`) gets wide tables instead of rich's 80-column default.
    width = None if sys.stdout.isatty() else 160
    console = Console(highlight=False, width=width)
    err = Console(stderr=True, highlight=False, width=width)
    try:
        if argv and argv[0] in SUBCOMMANDS:
            return dispatch(argv[0], argv[1:], console)
        args = build_run_parser().parse_args(argv)
        return cmd_run(args, argv, console, err)
    except UserError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
