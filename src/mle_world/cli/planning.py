"""Planning a sweep from the command line: flags + configs → a SweepPlan, and the files that record it.

Reads a SweepRequest (the checked flags), configs and git; writes launch.json and agent-config.yaml
(`write_plan_files`). Prints nothing.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import uuid
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import yaml

from mle_world import __version__, layout
from mle_world.cli.checks import ensure_dir
from mle_world.cli.options import (
    default_config_path,
    default_data_dir,
    endpoint_overrides,
)
from mle_world.cli.request import SweepRequest
from mle_world.errors import UserError
from mle_world.plan.config import (
    PaperConfig,
    load_cluster_config,
    load_paper_config,
    regime_hash,
    resolved_regime,
)
from mle_world.plan.render import Renderer, RuntimeSpec, render_command, view_paths
from mle_world.plan.runtimes.registry import runtime_named
from mle_world.plan.sweep import Selection, expand
from mle_world.plan.sweep_plan import SweepPlan, TrialCommand
from mle_world.records import (
    EndpointRecord,
    EndpointSettings,
    LaunchedTrial,
    LaunchRecord,
    Regime,
    Role,
)
from mle_world.storage import Unreadable, load_record, write_model, write_text_atomic
from mle_world.tasks.registry import load_registry

NO_SANDBOX_WARNING = (
    "--no-sandbox: generated code runs as you, with your files, the private answers under --data-dir, "
    "the endpoint keys (agent's /proc) and the trial's bookkeeping in reach, with network and without "
    "memory or process limits (see docs/threat-model.md). Results are not valid for the paper."
)


def _git_state() -> tuple[str | None, bool | None, str | None]:
    """(commit, src/ has uncommitted changes, sha256 of them when it does) of the checkout the package
    runs from; (None, None, None) for an installed copy (or without git)."""
    import mle_world

    package = Path(mle_world.__file__).resolve().parent

    def git(*args: str) -> subprocess.CompletedProcess[bytes] | None:
        try:
            return subprocess.run(["git", "-C", str(package), *args], capture_output=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            return None

    out = git("rev-parse", "--show-toplevel", "HEAD")
    lines = out.stdout.decode(errors="replace").split() if out is not None else []
    if (
        out is None
        or out.returncode != 0
        or len(lines) != 2
        or Path(lines[0]) / "src" / "mle_world" != package
    ):
        return None, None, None
    # Only the package's tree (src/: its code, configs and templates) counts: an edited README or a
    # notes file beside the checkout does not make a launch's code differ.
    status = git("status", "--porcelain", "--untracked-files=all", "--", ":/src")
    diff = git("diff", "HEAD", "--binary", "--", ":/src")
    if status is None or diff is None or status.returncode != 0 or diff.returncode != 0:
        return lines[1], None, None
    if not status.stdout.strip():
        return lines[1], False, None
    return lines[1], True, hashlib.sha256(status.stdout + b"\0" + diff.stdout).hexdigest()


def package_sha256(package: Path) -> str:
    """sha256 over the package's files (relative paths and contents, bytecode caches left out): what an
    installed copy's code is, where no commit says it."""
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*")):
        if "__pycache__" in path.parts or not path.is_file():
            continue
        digest.update(path.relative_to(package).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


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
    request: SweepRequest,
    endpoints: dict[Role, EndpointSettings],
    cluster_env: tuple[str, ...],
    mounts: tuple[tuple[str, str], ...] = (),
    gpus: bool = False,
) -> RuntimeSpec:
    names = ["CUDA_VISIBLE_DEVICES"]
    names += [e.key_env for e in endpoints.values() if e.key_env and e.key_env not in names]
    names += [n for n in cluster_env if n not in names]
    if not runtime_named(request.runtime).on_host:
        return RuntimeSpec(
            runtime=request.runtime,
            image=str(request.enroot_image.absolute()) if request.enroot_image else None,
            env_names=tuple(names),
            mounts=mounts,
            gpus=gpus,
        )
    import mle_world

    package_root = Path(mle_world.__file__).resolve().parents[1]
    prefixes = sorted({sys.prefix, sys.base_prefix, str(package_root)})
    python_bin = str(Path(sys.executable).parent)
    return RuntimeSpec(
        runtime=request.runtime,
        sandbox=not request.no_sandbox,
        python=sys.executable,
        host_paths=tuple(prefixes),
        env_names=tuple(names),
        path_env=f"{python_bin}:/usr/local/bin:/usr/bin:/bin",
        mounts=mounts,
    )


def _selection(request: SweepRequest, config: PaperConfig) -> Selection:
    """The trials the flags select; `-c COMPETITION` is one trial (seed from --seed, $MLE_SEED, or the first)."""
    if request.competition:
        seed = request.one_trial_seed
        return Selection(
            tasks=(request.competition,),
            configurations=(request.configuration_name or next(iter(config.configurations)),),
            seeds=(seed if seed is not None else config.seeds[0],),
            max_steps=request.iterations,
        )
    if request.seeds is not None:
        check_seeds(request.seeds, config.seeds)
    return Selection(
        tasks=request.tasks, configurations=request.configs, seeds=request.seeds, max_steps=request.iterations
    )


def _output_dir(request: SweepRequest, selection: Selection, regime: Regime) -> Path:
    """--output-dir, or for `-c` runs/<competition>-<configuration>-<regime>[-minimal]."""
    if request.output_dir is not None:
        return request.output_dir.absolute()
    if not selection.configurations:  # the request refused a sweep without --output-dir; `-c` has one
        raise UserError("--output-dir is required")
    # `-m MINIMAL` is another config with the same configuration names: its own dir, not a refused mix.
    mode = "-minimal" if request.kapso_mode == "MINIMAL" else ""
    return (Path("runs") / f"{request.competition}-{selection.configurations[0]}-{regime}{mode}").absolute()


def plan_sweep(request: SweepRequest) -> tuple[SweepPlan, PaperConfig, list[str]]:
    """Resolve a request + its configs into a SweepPlan (pure apart from reading configs and git)."""
    registry = load_registry(list(request.competitions_dirs))
    config = load_paper_config(request.config_path(), registry.__contains__)
    cluster_path = request.cluster_config or default_config_path("cluster.yaml")
    cluster = load_cluster_config(cluster_path if (request.cluster_config or cluster_path.exists()) else None)

    warnings: list[str] = []
    if request.competition and request.competition not in registry:
        raise UserError(
            f"-c/--competition: unknown competition '{request.competition}' (see `run_paper.py --list`)"
        )
    name = request.configuration_name
    if name and name not in config.configurations:
        raise UserError(
            f"-m/--configuration: unknown configuration '{name}' (choose from: {', '.join(config.configurations)})"
        )
    selection = _selection(request, config)
    regime = request.sweep_regime
    if request.competition and selection.seeds and selection.seeds[0] not in config.seeds:
        # A one-off seed (Kapso's MLE_SEED defaults to 1) is part of the sweep's identity, so a
        # later run with the config's seeds cannot mix into the same output dir unnoticed.
        config = replace(config, seeds=selection.seeds)
    if selection.max_steps is not None:
        # -i is science: agent-config.yaml, launch.json's config hash and the sweep's identity show it,
        # not only each trial's spec.json.
        budget = config.budget.model_copy(update={"max_steps": selection.max_steps})
        config = replace(config, budget=budget)
    output_dir = _output_dir(request, selection, regime)
    if request.no_sandbox:
        warnings.append(NO_SANDBOX_WARNING)

    data_dir = (request.data_dir or default_data_dir()).absolute()
    endpoints = endpoint_overrides(config, request.endpoints)
    config = replace(config, endpoints=endpoints)
    runtime = _runtime(
        request,
        endpoints,
        cluster.container.env,
        cluster.container.mount_pairs(),
        gpus=cluster.slurm.gpus_per_trial > 0,
    )

    if not cluster.sandbox.enabled:
        raise UserError(f"{cluster_path}: sandbox.enabled: turn the sandbox off with --no-sandbox only")
    sandbox = cluster.sandbox.model_copy(update={"enabled": not request.no_sandbox})
    trials = expand(
        config,
        regime,
        selection,
        output_dir=output_dir,
        data_dir=data_dir,
        known_task=registry.__contains__,
        view=lambda trial_dir, public: view_paths(runtime, trial_dir, public),
        direction=registry.lower_is_better,
        sandbox=sandbox,
    )
    renderer = Renderer()
    commands = tuple(TrialCommand(trial=t, command=render_command(t, runtime, renderer)) for t in trials)
    # The identity of an output dir is the whole regime's science, not the filtered subset, so a
    # later `--configs`/`--tasks` run on the same dir is accepted; spec.json hashes guard each trial.
    config_hash = regime_hash(config, regime, tuple(config.configurations))
    git_sha, git_dirty, git_diff = _git_state()
    record = LaunchRecord(
        argv=request.argv,
        launch_id=uuid.uuid4().hex[:8],
        harness_version=__version__,
        git_sha=git_sha,
        git_dirty=git_dirty,
        git_diff_sha256=git_diff,
        package_sha256=package_sha256(Path(__file__).resolve().parents[1]) if git_sha is None else None,
        created_at=datetime.now(UTC),
        regime=regime,
        config_path=str(config.path.absolute()),
        config_hash=config_hash,
        cluster_path=str(cluster_path.absolute()) if cluster_path.exists() else None,
        backend=request.backend,
        runtime=request.runtime,
        dry_run=request.dry_run,
        sandbox=runtime.sandbox,
        warnings=tuple(warnings),
        data_dir=str(data_dir),
        competitions_dirs=tuple(str(d.absolute()) for d in request.competitions_dirs),
        image_path=runtime.image,
        endpoints_file=str(file.absolute()) if (file := request.endpoints.endpoints_file) else None,
        endpoints=tuple(
            EndpointRecord(role=role, url=url, key_env=e.key_env, served_models=(e.model,) if e.model else ())
            for role, e in endpoints.items()
            for url in e.urls
        ),
        trials=tuple(
            LaunchedTrial(
                trial_id=c.trial.trial_id,
                science_hash=c.trial.spec.science_hash,
                trial_dir=str(c.trial.trial_dir),
                command=c.command,
            )
            for c in commands
        ),
    )
    plan = SweepPlan(
        output_dir=output_dir,
        data_dir=data_dir,
        regime=regime,
        commands=commands,
        runtime=runtime,
        cluster=cluster,
        record=record,
        config_hash=config_hash,
        local_competitions=dict(registry.local),
    )
    return plan, config, warnings


def write_plan_files(plan: SweepPlan, config: PaperConfig) -> tuple[Path, Path]:
    """launch.json + agent-config.yaml (returned in that order); a dry run never overwrites a real
    run's: beside one it writes launch.dry-run.json and agent-config.dry-run.yaml instead."""
    files = layout.OutputFiles(ensure_dir(plan.output_dir, "--output-dir"))
    launch_path, config_path = files.launch, files.agent_config
    if plan.record.dry_run and launch_path.exists():
        previous = load_record(launch_path, LaunchRecord)
        # Anything but a dry run's record there may be a real run's, kept.
        if isinstance(previous, Unreadable) or not previous.dry_run:
            launch_path, config_path = files.dry_run_launch, files.dry_run_agent_config
    resolved = resolved_regime(config, plan.regime, tuple(config.configurations))
    resolved["config_hash"] = plan.config_hash
    # libyaml's emitter when available: the same text as safe_dump, several times faster.
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    text = yaml.dump(resolved, Dumper=dumper, sort_keys=False, width=110)
    write_text_atomic(config_path, text)
    record = plan.record
    if not record.dry_run and launch_path.exists():
        record = with_earlier_trials(record, launch_path)
    write_model(launch_path, record)
    return launch_path, config_path


def with_earlier_trials(record: LaunchRecord, path: Path) -> LaunchRecord:
    """This launch's record listing also the trials earlier real launches of the same sweep listed in
    `path` (theirs first, this launch's commands replacing theirs). The audit takes a sweep's trials
    from launch.json: a re-run of a subset (`--tasks`, `--configs`, `--seeds`) dropped every other
    trial's results from its tables."""
    previous = load_record(path, LaunchRecord)
    if (
        isinstance(previous, Unreadable)
        or previous.dry_run
        or (previous.regime, previous.config_hash) != (record.regime, record.config_hash)
    ):
        return record
    new = {trial.trial_id: trial for trial in record.trials}
    merged = [new.pop(trial.trial_id, trial) for trial in previous.trials] + list(new.values())
    earlier = (*previous.earlier_launches, previous.provenance())
    return record.model_copy(update={"trials": tuple(merged), "earlier_launches": earlier})
