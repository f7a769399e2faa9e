"""Checks of the container runtime on the launching host before a sweep starts.

Reads PATH, `srun --help`, the image and its manifest (launch/image.py); writes nothing. Each
problem is one UserError line naming what to install or fix. On the Slurm backend the compute
nodes are not checked from here: the docs say what they need (enroot, squashfuse, pyxis).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable

from mle_world.errors import UserError
from mle_world.launch.image import ImageInfo, verify_image

Which = Callable[[str], str | None]


def check_container_runtime(runtime: str, backend: str, which: Which = shutil.which) -> None:
    """`enroot start IMAGE.sqsh` needs enroot and squashfuse here; pyxis needs srun with --container-image."""
    if runtime == "enroot" and backend == "local":
        if which("enroot") is None:
            raise UserError(
                "--runtime enroot: enroot not found on PATH (install NVIDIA enroot; check with `enroot version`)"
            )
        if which("squashfuse") is None:
            raise UserError(
                "--runtime enroot: squashfuse not found on PATH; `enroot start IMAGE.sqsh` mounts the image "
                "with it (Debian/Ubuntu: apt-get install squashfuse fuse-overlayfs)"
            )
    if runtime == "pyxis":
        if which("srun") is None:
            raise UserError("--runtime pyxis: srun not found on PATH (pyxis runs through Slurm)")
        try:
            helptext = subprocess.run(["srun", "--help"], capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.SubprocessError) as exc:
            raise UserError(f"--runtime pyxis: `srun --help` failed: {exc}") from None
        if "--container-image" not in helptext:
            raise UserError(
                "--runtime pyxis: srun has no --container-image option (the pyxis plugin is not enabled "
                "in plugstack.conf; check with `srun --help | grep container-image`)"
            )


def check_image(path: str) -> ImageInfo:
    """verify_image, then refuse an image whose manifest names another sha256 (changed after its build)."""
    info = verify_image(path)
    if info.manifest_sha256_matches is False:
        raise UserError(
            f"--enroot-image {info.path}: sha256 {info.sha256} differs from {info.manifest_path}; "
            "the image changed after it was built (rebuild it, or remove the stale manifest)"
        )
    return info
