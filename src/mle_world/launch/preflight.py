"""Checks on the launching host before a sweep starts: the selected tasks' data and graders, the runtime.

Reads the tasks' folders under --data-dir (and, with --grade, their answers and leaderboards), PATH (enroot,
squashfuse, nvidia-smi), `srun --help`, the image and its manifest (launch/image.py);
writes nothing. Each problem is one UserError line naming what to prepare, install or fix. On the Slurm
backend the compute nodes are not checked from here: the docs say what they need (enroot, squashfuse, pyxis).
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path

from mle_world.errors import NotPreparedError, UserError, not_a_dir
from mle_world.grading.isolation import IsolatedGrader
from mle_world.launch.image import ImageInfo, verify_image
from mle_world.plan.sweep import PlannedTrial

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


def check_host_gpus(
    runtime: str, backend: str, gpus: Sequence[str], trial_path: str, flag: str = "--gpu-device "
) -> None:
    """A local pool of `--runtime process` trials runs them on this host with its PATH: without nvidia-smi there,
    every trial given a GPU fails its GPU check at once (a machine without GPUs and the default --gpu-device 0).

    `flag`: what gave the GPUs, as the message names it ("--gpu-device " or "CUDA_DEVICE=")."""
    if runtime != "process" or backend != "local" or not gpus:
        return
    if shutil.which("nvidia-smi", path=trial_path) is None:
        raise UserError(
            f"{flag}{','.join(gpus)}: this host has no nvidia-smi (on {trial_path}), so every trial given "
            "a GPU would fail at once; without GPUs pass --gpu-device none"
        )


def check_prepared(trials: Sequence[PlannedTrial], data_dir: Path, local: Collection[str] = ()) -> None:
    """Every selected task needs its public and private folders under --data-dir; else one line
    naming the missing tasks and the command that prepares them (NotPreparedError, exit 2)."""
    if data_dir.exists() and not data_dir.is_dir():
        # A file there made every task "not prepared", and the hint said to prepare into it.
        raise NotPreparedError(f"--data-dir {data_dir}: {not_a_dir(data_dir)}")
    missing: list[str] = []
    for trial in trials:
        task = trial.spec.task
        if task in missing:
            continue
        if not (trial.public_dir.is_dir() and trial.private_dir.is_dir()):
            missing.append(task)
    if not missing:
        return
    data = shlex.quote(str(data_dir))
    hints: list[str] = []
    mle = [t for t in missing if t not in local]
    ours = [t for t in missing if t in local]
    if len(mle) == 1:
        hints.append(f"mlebench prepare -c {mle[0]} --data-dir {data}")
    elif mle:
        hints.append(f'for t in {" ".join(mle)}; do mlebench prepare -c "$t" --data-dir {data}; done')
    if ours:
        hints.append(f"run_paper.py prepare --tasks {','.join(ours)} --data-dir {data}")
    noun = "task" if len(missing) == 1 else "tasks"
    raise NotPreparedError(
        f"--data-dir {data_dir}: {len(missing)} {noun} not prepared: {', '.join(missing)}; run: "
        + " && ".join(hints)
    )


def check_grading(trials: Sequence[PlannedTrial], data_dir: Path, local: Mapping[str, Path]) -> str | None:
    """With --grade: every selected task can be graded here (mlebench installed, answers and a real
    leaderboard in place), checked by grading no file; else one UserError line, before any trial runs.
    Returns the MLE-bench that graded (recorded in launch.json), None for local competitions only."""
    with IsolatedGrader(data_dir, local) as grader:
        return grader.check(sorted({trial.spec.task for trial in trials}))
