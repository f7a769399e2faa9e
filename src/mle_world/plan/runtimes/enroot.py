"""`--runtime enroot`: `enroot start IMAGE.sqsh` on the node that runs the trial (templates/enroot.sh.j2).

Renders a command (writes nothing); its preflight reads PATH and the image through the `Host`.
"""

from __future__ import annotations

from typing import ClassVar

from mle_world.errors import UserError
from mle_world.plan.runtimes.base import GPU_NAMES, ContainerRuntime, Host, Renderer, RuntimeSpec, TrialView


class Enroot(ContainerRuntime):
    name: ClassVar[str] = "enroot"
    summary: ClassVar[str] = "enroot start (default)"
    inexpressible: ClassVar[str] = ":"
    mount_syntax: ClassVar[str] = "enroot mounts"

    def render(self, spec: RuntimeSpec, trial: TrialView, renderer: Renderer) -> str:
        # Enroot's NVIDIA hook mounts exactly the GPUs NVIDIA_VISIBLE_DEVICES names, renumbered from 0
        # inside, so the host ids of CUDA_VISIBLE_DEVICES would point at the wrong ones: not passed.
        context = trial.context(spec)
        context["env_names"] = [n for n in spec.env_names if n != "CUDA_VISIBLE_DEVICES"] + list(GPU_NAMES)
        env_values = [("PYTHONUNBUFFERED", "1"), *spec.env_values]
        return renderer.render("enroot.sh.j2", image=spec.image, env_values=env_values, **context)

    def preflight(self, spec: RuntimeSpec, backend: str, host: Host) -> str | None:
        """`enroot start IMAGE.sqsh` needs enroot and squashfuse here (the Slurm backend's nodes are
        not checked from here: docs/image-and-servers.md says what they need)."""
        if backend == "local":
            if host.which("enroot") is None:
                raise UserError(
                    "--runtime enroot: enroot not found on PATH (install NVIDIA enroot; check with `enroot version`)"
                )
            if host.which("squashfuse") is None:
                raise UserError(
                    "--runtime enroot: squashfuse not found on PATH; `enroot start IMAGE.sqsh` mounts the image "
                    "with it (Debian/Ubuntu: apt-get install squashfuse fuse-overlayfs)"
                )
        return host.squashfs_image(spec.image) if spec.image else None
