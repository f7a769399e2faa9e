"""`--runtime apptainer`: `apptainer exec IMAGE.sif` (or `singularity exec`) on the node that runs the
trial (templates/apptainer.sh.j2). Unverified: no Apptainer runs here (docs/image-and-servers.md).

Renders a command (writes nothing); its preflight reads PATH and the image through the `Host`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from mle_world.errors import UserError
from mle_world.plan.runtimes.base import (
    GPU_NAMES,
    ContainerRuntime,
    Host,
    Renderer,
    RuntimeSpec,
    TrialView,
    require_host_nvidia_smi,
)


class Apptainer(ContainerRuntime):
    name: ClassVar[str] = "apptainer"
    summary: ClassVar[str] = "apptainer (or singularity) exec of a .sif image, unverified"
    image_suffix: ClassVar[str] = ".sif"
    inexpressible: ClassVar[str] = ",:"
    mount_syntax: ClassVar[str] = "apptainer --bind"

    def render(self, spec: RuntimeSpec, trial: TrialView, renderer: Renderer) -> str:
        # --cleanenv passes no host variable; APPTAINERENV_X (SINGULARITYENV_X for Singularity) becomes
        # X inside, so keys cross by name. CUDA_VISIBLE_DEVICES keeps the host's ids: --nv shows every
        # GPU of the node (or of the job's cgroup) without renumbering. The NVIDIA_* pair is for the
        # agent's GPU check and the template's --nv choice.
        context = trial.context(spec)
        context["env_names"] = [n for n in spec.env_names if n not in GPU_NAMES] + list(GPU_NAMES)
        env_values = [("PYTHONUNBUFFERED", "1"), *spec.env_values]
        return renderer.render("apptainer.sh.j2", image=spec.image, env_values=env_values, **context)

    def preflight(self, spec: RuntimeSpec, backend: str, host: Host) -> str | None:
        """apptainer or singularity here for a local pool (the Slurm backend's nodes are not checked
        from here), and a SIF image either way."""
        if backend == "local" and host.which("apptainer") is None and host.which("singularity") is None:
            raise UserError(
                "--runtime apptainer: neither apptainer nor singularity found on PATH (install Apptainer; "
                "check with `apptainer version`)"
            )
        return host.sif_image(spec.image) if spec.image else None

    def check_gpus(self, backend: str, gpus: Sequence[str], spec: RuntimeSpec, flag: str, host: Host) -> None:
        """--nv binds the host's NVIDIA driver and nvidia-smi into the container: without them here, a
        local pool's trials given GPUs would fail their GPU check at once."""
        if backend == "local" and gpus:
            require_host_nvidia_smi(gpus, None, flag, host)
