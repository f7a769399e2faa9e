"""The contract every runtime (how a trial's agent is started) meets, and what a runtime is given.

Reads templates shipped in `plan/templates/`; writes nothing. A runtime's preflight reads the launching
host only through the `Host` it is handed (launch/preflight.py's), so planning stays free of effects.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Protocol

import jinja2

from mle_world.errors import UserError
from mle_world.records import TrialPaths

CONTAINER_TRIAL = "/home/trial"
CONTAINER_DATA = "/home/data"
GPU_NAMES = ("NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES")
"""Set by the launcher from the trial's GPUs (launch/gpus.py); the agent's GPU check reads them too."""


@dataclass(frozen=True)
class RuntimeSpec:
    """How trials run: container runtime, image, sandbox and what crosses into the container."""

    runtime: str
    """A name in the registry (plan/runtimes/registry.py)."""
    image: str | None = None
    sandbox: bool = True
    python: str = "python3"
    """Interpreter that starts the agent: inside the image, or the host's for `process`."""
    host_paths: tuple[str, ...] = ()
    """`process` + sandbox: host paths bound read-only (Python prefixes, the package source)."""
    env_names: tuple[str, ...] = ()
    """Variables passed by name (keys, CUDA_VISIBLE_DEVICES): their values never appear in commands."""
    env_values: tuple[tuple[str, str], ...] = ()
    mounts: tuple[tuple[str, str], ...] = ()
    """Extra read-only mounts (src, dst)."""
    gpus: bool = False
    """cluster.yaml gives each Slurm trial GPUs (slurm.gpus_per_trial > 0); pyxis renders from it."""
    path_env: str = "/usr/local/bin:/usr/bin:/bin"


@dataclass(frozen=True)
class Renderer:
    """Renders commands with StrictUndefined templates and shell-quoting of every value."""

    env: jinja2.Environment = field(
        default_factory=lambda: jinja2.Environment(
            loader=jinja2.PackageLoader("mle_world.plan", "templates"),
            undefined=jinja2.StrictUndefined,
            autoescape=False,
            keep_trailing_newline=False,
            # The templates are the package's: no stat() of the file at every render to see whether
            # it changed (2,380 of them in a 2,380-trial plan).
            auto_reload=False,
        )
    )

    def __post_init__(self) -> None:
        self.env.filters["q"] = lambda value: shlex.quote(str(value))

    def render(self, template: str, **context: object) -> str:
        return self.env.get_template(template).render(**context).strip()


@dataclass(frozen=True)
class TrialView:
    """One trial as a runtime renders it: the host dirs it mounts, the agent's home and argv."""

    trial_dir: Path
    public_dir: Path
    home: str
    """The trial dir as the agent sees it."""
    agent_argv: tuple[str, ...]

    def context(self, spec: RuntimeSpec) -> dict[str, object]:
        """What every template is given."""
        return {
            "trial_dir": str(self.trial_dir),
            "public_dir": str(self.public_dir),
            "container_trial": CONTAINER_TRIAL,
            "container_data": CONTAINER_DATA,
            "agent_argv": list(self.agent_argv),
            "env_names": list(spec.env_names),
            "mounts": list(spec.mounts),
        }


class Host(Protocol):
    """The launching host as a runtime's preflight sees it (launch/preflight.py's `LocalHost`)."""

    def which(self, name: str, path: str | None = None) -> str | None:
        """The program's path on `path` (default: this process's PATH), or None."""
        ...

    def output(self, argv: Sequence[str]) -> str:
        """The program's standard output; OSError when it cannot run or hangs."""
        ...

    def squashfs_image(self, path: str) -> str | None:
        """The sha256 of a verified squashfs image; UserError naming the flag when it is none."""
        ...

    def sif_image(self, path: str) -> str:
        """The sha256 of a verified SIF image; UserError naming the flag when it is none."""
        ...


class Runtime(Protocol):
    """One way of starting a trial's agent. The registry holds one instance of each; nothing else
    compares runtime names."""

    name: ClassVar[str]
    summary: ClassVar[str]
    """What `--runtime NAME` does, for the flag's help."""
    needs_image: ClassVar[bool]
    """The trial runs from `--enroot-image`, which is then required."""
    image_suffix: ClassVar[str]
    """The image file it takes (".sqsh", ".sif"), for the flag's help."""
    on_host: ClassVar[bool]
    """The agent runs with the host's Python and no image; only such a runtime takes --no-sandbox."""
    inexpressible: ClassVar[str]
    """Characters its mount syntax cannot carry in a path."""
    mount_syntax: ClassVar[str]
    """How refusals name that syntax."""

    def view_paths(self, spec: RuntimeSpec, trial_dir: Path, public_dir: Path) -> TrialPaths: ...

    def shown_paths(self, spec: RuntimeSpec) -> tuple[str, ...]:
        """Host paths the trial sees besides its own dirs and the mounts."""
        ...

    def render(self, spec: RuntimeSpec, trial: TrialView, renderer: Renderer) -> str: ...

    def preflight(self, spec: RuntimeSpec, backend: str, host: Host) -> str | None:
        """Refuse (UserError) what cannot start here; the image's sha256 when it runs from one."""
        ...

    def check_gpus(self, backend: str, gpus: Sequence[str], spec: RuntimeSpec, flag: str, host: Host) -> None:
        """Refuse GPUs this host cannot give a trial of this runtime (`flag` names where they came from)."""
        ...


class ContainerRuntime:
    """What most runtimes share: the agent sees fixed container paths and nothing of the host; no
    GPU check on the launching host (the agent checks its GPUs at the start of a trial)."""

    needs_image: ClassVar[bool] = True
    image_suffix: ClassVar[str] = ".sqsh"
    on_host: ClassVar[bool] = False
    inexpressible: ClassVar[str] = ""
    mount_syntax: ClassVar[str] = ""

    def view_paths(self, spec: RuntimeSpec, trial_dir: Path, public_dir: Path) -> TrialPaths:
        return TrialPaths(trial_dir=CONTAINER_TRIAL, data_dir=CONTAINER_DATA)

    def shown_paths(self, spec: RuntimeSpec) -> tuple[str, ...]:
        return ()

    def check_gpus(self, backend: str, gpus: Sequence[str], spec: RuntimeSpec, flag: str, host: Host) -> None:
        return None


def require_host_nvidia_smi(gpus: Sequence[str], path: str | None, flag: str, host: Host) -> None:
    """Trials that take the host's nvidia-smi fail their GPU check at once without one (a machine
    without GPUs and the default --gpu-device 0)."""
    if host.which("nvidia-smi", path=path) is None:
        where = path if path is not None else "PATH"
        raise UserError(
            f"{flag}{','.join(gpus)}: this host has no nvidia-smi (on {where}), so every trial given "
            "a GPU would fail at once; without GPUs pass --gpu-device none"
        )
