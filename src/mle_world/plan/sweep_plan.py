"""A fully resolved sweep: trials, their rendered commands and the provenance record.

Built by the CLI from config + sweep + render; read by launch backends. Writes nothing itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from mle_world.plan.cluster import ClusterConfig
from mle_world.plan.render import RuntimeSpec
from mle_world.plan.sweep import PlannedTrial
from mle_world.records import LaunchRecord, Regime


@dataclass(frozen=True)
class TrialCommand:
    """One trial and the rendered command that runs its agent (what the launcher hands a backend)."""

    trial: PlannedTrial
    command: str


@dataclass(frozen=True)
class LaunchOptions:
    """How to execute a plan (nothing here changes a trial's identity)."""

    backend: str = "local"
    n_workers: int = 1
    gpu_devices: tuple[str, ...] = ("0",)
    trials_per_gpu: int = 1
    grade: bool = False
    retry_failed: str | None = None
    """None, 'infra' or 'all'."""
    show_progress: bool = True
    wait: bool = True
    """Slurm backend: watch the submitted jobs until every trial is final (False: submit and return)."""


@dataclass(frozen=True)
class SweepPlan:
    """Everything a backend needs to run a regime's trials."""

    output_dir: Path
    data_dir: Path
    regime: Regime
    commands: tuple[TrialCommand, ...]
    runtime: RuntimeSpec
    cluster: ClusterConfig
    record: LaunchRecord
    config_hash: str
    local_competitions: dict[str, Path] = field(default_factory=dict)
    prices_path: Path | None = None
