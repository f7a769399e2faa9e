"""`--runtime pyxis`: each trial one Slurm job step, `srun --container-image` (templates/pyxis.sh.j2).

Renders a command (writes nothing); its preflight runs `srun --help` and reads the image through the `Host`.
"""

from __future__ import annotations

from typing import ClassVar

from mle_world.errors import UserError
from mle_world.plan.runtimes.base import (
    CONTAINER_DATA,
    CONTAINER_TRIAL,
    ContainerRuntime,
    Host,
    Renderer,
    RuntimeSpec,
    TrialView,
)


class Pyxis(ContainerRuntime):
    name: ClassVar[str] = "pyxis"
    summary: ClassVar[str] = "srun with pyxis"
    inexpressible: ClassVar[str] = ",:"
    mount_syntax: ClassVar[str] = "pyxis --container-mounts"

    def render(self, spec: RuntimeSpec, trial: TrialView, renderer: Renderer) -> str:
        # The hook mounts what NVIDIA_VISIBLE_DEVICES names. With GPUs it is the launcher's, set per
        # trial to the node's ids of the trial's GPUs (launch/gpus.py), and srun's `--export=ALL` passes
        # it on untouched: Slurm rewrites only CUDA_VISIBLE_DEVICES, to every GPU of the job for each
        # step (`all` gave every trial of a local pool all of them, and each ran on the first). Without
        # GPUs it is `void` on srun's own environment (`--export=ALL,NAME=value` keeps a NAME the
        # environment already has; verified with Slurm 22.05).
        gpu_values = [] if spec.gpus else [("NVIDIA_VISIBLE_DEVICES", "void")]
        mounts = [f"{trial.trial_dir}:{CONTAINER_TRIAL}", f"{trial.public_dir}:{CONTAINER_DATA}:ro"]
        mounts += [f"{src}:{dst}:ro" for src, dst in spec.mounts]
        return renderer.render(
            "pyxis.sh.j2",
            image=spec.image,
            mounts_arg=",".join(mounts),
            step_env=gpu_values,
            env_values=[("PYTHONUNBUFFERED", "1"), *spec.env_values],
            **trial.context(spec),
        )

    def preflight(self, spec: RuntimeSpec, backend: str, host: Host) -> str | None:
        """pyxis needs srun with --container-image, on either backend (a local pool's trials are job
        steps of the allocation it runs in)."""
        if host.which("srun") is None:
            raise UserError("--runtime pyxis: srun not found on PATH (pyxis runs through Slurm)")
        try:
            helptext = host.output(["srun", "--help"])
        except OSError as exc:
            raise UserError(f"--runtime pyxis: `srun --help` failed: {exc}") from None
        if "--container-image" not in helptext:
            raise UserError(
                "--runtime pyxis: srun has no --container-image option (the pyxis plugin is not enabled "
                "in plugstack.conf; check with `srun --help | grep container-image`)"
            )
        return host.squashfs_image(spec.image) if spec.image else None
