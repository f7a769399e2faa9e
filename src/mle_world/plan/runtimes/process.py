"""`--runtime process`: no container; the host's Python under bubblewrap (templates/process-sandbox.sh.j2),
or with `--no-sandbox` bare (templates/process.sh.j2).

Renders a command (writes nothing); its GPU check reads the trials' PATH through the `Host`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

from mle_world.plan.runtimes.base import (
    CONTAINER_DATA,
    CONTAINER_TRIAL,
    Host,
    Renderer,
    RuntimeSpec,
    TrialView,
    require_host_nvidia_smi,
)
from mle_world.records import TrialPaths

SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc")
"""What the sandbox shows of the host besides the Python prefixes: the image's equivalent."""
GPU_DEVICES = tuple(f"/dev/nvidia{i}" for i in range(8)) + (
    "/dev/nvidiactl",
    "/dev/nvidia-uvm",
    "/dev/nvidia-uvm-tools",
)


class Process:
    name: ClassVar[str] = "process"
    summary: ClassVar[str] = "no container, under bubblewrap"
    needs_image: ClassVar[bool] = False
    image_suffix: ClassVar[str] = ""
    on_host: ClassVar[bool] = True
    inexpressible: ClassVar[str] = ""
    mount_syntax: ClassVar[str] = "bubblewrap binds"

    def view_paths(self, spec: RuntimeSpec, trial_dir: Path, public_dir: Path) -> TrialPaths:
        """Unsandboxed, the agent sees the host's paths; in bubblewrap, the containers' fixed ones."""
        if not spec.sandbox:
            return TrialPaths(trial_dir=str(trial_dir), data_dir=str(public_dir))
        return TrialPaths(trial_dir=CONTAINER_TRIAL, data_dir=CONTAINER_DATA)

    def shown_paths(self, spec: RuntimeSpec) -> tuple[str, ...]:
        return SYSTEM_PATHS + spec.host_paths if spec.sandbox else ()

    def render(self, spec: RuntimeSpec, trial: TrialView, renderer: Renderer) -> str:
        env_values = [
            ("PATH", spec.path_env),
            ("HOME", trial.home),
            ("LANG", "C.UTF-8"),
            ("PYTHONUNBUFFERED", "1"),
            *spec.env_values,
        ]
        if spec.sandbox:
            return renderer.render(
                "process-sandbox.sh.j2",
                env_values=env_values,
                system_paths=list(SYSTEM_PATHS),
                host_paths=list(spec.host_paths),
                gpu_devices=list(GPU_DEVICES),
                **trial.context(spec),
            )
        return renderer.render("process.sh.j2", env_values=env_values, **trial.context(spec))

    def preflight(self, spec: RuntimeSpec, backend: str, host: Host) -> str | None:
        return None

    def check_gpus(self, backend: str, gpus: Sequence[str], spec: RuntimeSpec, flag: str, host: Host) -> None:
        """A local pool runs these trials on this host with the trials' PATH: its nvidia-smi is theirs."""
        if backend == "local" and gpus:
            require_host_nvidia_smi(gpus, spec.path_env, flag, host)
