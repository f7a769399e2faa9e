"""The sweep command's request: its parsed flags and the environment they consult, checked once.

Reads an argparse Namespace and the environment given to it (MLE_SEED, CUDA_DEVICE); writes nothing.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from mle_world.cli.kapso import MODES
from mle_world.cli.options import EndpointFlags, default_config_path
from mle_world.errors import UserError
from mle_world.plan.runtimes.registry import DEFAULT, listed, on_host, runtime_named
from mle_world.records import Regime


def check_lists(
    tasks: tuple[str, ...] | None, configs: tuple[str, ...] | None, seeds: tuple[int, ...] | None
) -> None:
    """--tasks/--configs/--seeds given empty are refused (the sweep and `estimate` select the same way:
    an empty list meant "everything" there)."""
    for flag, value in (("--tasks", tasks), ("--configs", configs)):
        if value is not None and not value:
            raise UserError(f"{flag}: nothing given (leave the flag out to use the config's list)")
    if seeds is not None and not seeds:
        raise UserError("--seeds: no seed given (expected e.g. --seeds 34,35)")


@dataclass(frozen=True)
class SweepRequest:
    """What `run_paper.py [flags]` asks for, as typed values; every rule about which flags go together
    is checked here, once, before any config is read (a violation: UserError, one line naming the flag).

    A frozen dataclass, not a pydantic model: its values are already typed by argparse (Path, tuples),
    so there is nothing to coerce, and pydantic's own messages would replace the CLI's one-line ones; it
    never crosses a file boundary (launch.json is `records.LaunchRecord`). Fields hold the flags as
    given; what follows from them (Kapso's mode, the regime, the seed) are properties.
    """

    argv: tuple[str, ...] = ()
    config: Path | None = None
    cluster_config: Path | None = None
    regime: Regime | None = None
    output_dir: Path | None = None
    data_dir: Path | None = None
    competitions_dirs: tuple[Path, ...] = ()
    tasks: tuple[str, ...] | None = None
    configs: tuple[str, ...] | None = None
    seeds: tuple[int, ...] | None = None
    grade: bool = False
    prices: Path | None = None
    dry_run: bool = False
    summary: bool = False
    retry_failed: Literal["infra", "all"] | None = None
    allow_provenance_change: bool = False
    endpoints: EndpointFlags = field(default_factory=EndpointFlags)
    backend: Literal["local", "slurm"] = "local"
    runtime: str = DEFAULT
    """A name in the runtime registry (argparse offered only those)."""
    enroot_image: Path | None = None
    no_sandbox: bool = False
    n_workers: int = 1
    gpu_device: str | None = None
    trials_per_gpu: int = 1
    no_progress: bool = False
    no_wait: bool = False
    no_endpoint_check: bool = False
    competition: str | None = None
    iterations: int | None = None
    configuration: str | None = None
    """`-m`: a configuration name, or Kapso's mode (`MODES`), which picks the config instead."""
    seed: int | None = None
    mle_seed: str | None = None
    """$MLE_SEED: `-c`'s seed when --seed is not given."""
    cuda_device: str | None = None
    """$CUDA_DEVICE: `-c`'s GPUs when --gpu-device is not given."""

    @classmethod
    def from_args(
        cls, args: argparse.Namespace, argv: tuple[str, ...], environ: Mapping[str, str]
    ) -> SweepRequest:
        return cls(
            argv=argv,
            config=args.config,
            cluster_config=args.cluster_config,
            regime=args.regime,
            output_dir=args.output_dir,
            data_dir=args.data_dir,
            competitions_dirs=tuple(args.competitions_dir),
            tasks=args.tasks,
            configs=args.configs,
            seeds=args.seeds,
            grade=args.grade,
            prices=args.prices,
            dry_run=args.dry_run,
            summary=args.summary,
            retry_failed=args.retry_failed,
            allow_provenance_change=args.allow_provenance_change,
            endpoints=EndpointFlags.from_args(args),
            backend=args.backend,
            runtime=args.runtime,
            enroot_image=args.enroot_image,
            no_sandbox=args.no_sandbox,
            n_workers=args.n_workers,
            gpu_device=args.gpu_device,
            trials_per_gpu=args.trials_per_gpu,
            no_progress=args.no_progress,
            no_wait=args.no_wait,
            no_endpoint_check=args.no_endpoint_check,
            competition=args.competition,
            iterations=args.iterations,
            configuration=args.configuration,
            seed=args.seed,
            mle_seed=environ.get("MLE_SEED"),
            cuda_device=environ.get("CUDA_DEVICE"),
        )

    def __post_init__(self) -> None:
        mode = self.kapso_mode
        if mode is not None and self.config is not None:
            raise UserError(
                f"-m {mode}: Kapso's mode picks configs/{MODES[mode]}, but --config {self.config} is given "
                "(drop one, or name a configuration of that config with -m)"
            )
        if self.competition:
            given = [flag for flag in ("tasks", "configs", "seeds") if getattr(self, flag) is not None]
            if given:
                # They would be ignored: `-c X --configs wm-point` ran the first configuration.
                raise UserError(
                    f"--{given[0]} does not combine with -c COMPETITION (one trial: use -m/--configuration, --seed)"
                )
            if self.seed is None and self.mle_seed:
                try:
                    int(self.mle_seed)
                except ValueError:
                    raise UserError(f"MLE_SEED={self.mle_seed!r} is not an integer") from None
        else:
            check_lists(self.tasks, self.configs, self.seeds)
            if self.configuration_name or self.seed is not None:
                raise UserError(
                    "-m/--configuration and --seed need -c COMPETITION (use --configs/--seeds for sweeps)"
                )
            if self.regime is None:
                raise UserError("--regime is required (gated or ungated)")
            if self.output_dir is None:
                raise UserError("--output-dir is required")
        if self.no_sandbox and not runtime_named(self.runtime).on_host:
            raise UserError(f"--no-sandbox applies to --runtime {listed(on_host())} only")
        if self.summary and not self.dry_run:
            raise UserError("--summary needs --dry-run")
        if self.no_wait and self.backend != "slurm":
            raise UserError(
                "--no-wait: only with --backend slurm (the local pool runs its trials in this process)"
            )

    @property
    def kapso_mode(self) -> str | None:
        """Kapso's `-m MLE_CONFIGS|MINIMAL`, when `-m` names a mode rather than a configuration."""
        return self.configuration if self.configuration in MODES else None

    @property
    def configuration_name(self) -> str | None:
        """`-m`'s configuration (None for a Kapso mode: the config's first)."""
        return None if self.kapso_mode else self.configuration

    def config_path(self) -> Path:
        """--config, else the mode's or the default paper config (`configs/<name>` of the cwd wins)."""
        mode = self.kapso_mode
        return self.config or default_config_path(MODES[mode] if mode else "paper.yaml")

    @property
    def sweep_regime(self) -> Regime:
        """--regime; a one-trial run (`-c`) without it is gated."""
        return self.regime or "gated"

    @property
    def one_trial_seed(self) -> int | None:
        """`-c`'s seed: --seed, else $MLE_SEED (None: the config's first)."""
        if self.seed is None and self.mle_seed:
            return int(self.mle_seed)
        return self.seed

    @property
    def gpus_from_env(self) -> bool:
        """Whether $CUDA_DEVICE gives the GPUs: one-trial runs (`-c`) without --gpu-device honour it, like
        the Kapso-style scripts they replace."""
        return self.gpu_device is None and bool(self.competition and self.cuda_device)

    @property
    def gpu_text(self) -> str:
        """The local pool's GPU list as the user gave it (flag, $CUDA_DEVICE or the default "0")."""
        if self.gpus_from_env and self.cuda_device:
            return self.cuda_device
        return self.gpu_device or "0"
