"""Checks on the launching host before a sweep starts: the selected tasks' data and graders, the runtime.

Reads the tasks' folders under --data-dir (and, with --grade, their answers and leaderboards) and, for the
runtime's own checks (plan/runtimes/), PATH, `srun --help`, the image and its manifest (launch/image.py);
writes nothing. Each problem is one UserError line naming what to prepare, install or fix. On the Slurm
backend the compute nodes are not checked from here: the docs say what they need.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from mle_world.errors import NotPreparedError, UserError, not_a_dir
from mle_world.grading.isolation import IsolatedGrader
from mle_world.launch.image import ImageInfo, verify_image, verify_sif
from mle_world.plan.runtimes.base import Host, RuntimeSpec
from mle_world.plan.runtimes.registry import runtime_named
from mle_world.plan.sweep import PlannedTrial

Which = Callable[..., str | None]
HELP_TIMEOUT_S = 60


@dataclass(frozen=True)
class LocalHost:
    """This host, as the runtimes' preflight checks see it (plan.runtimes.base.Host)."""

    which_program: Which = shutil.which

    def which(self, name: str, path: str | None = None) -> str | None:
        return self.which_program(name, path=path)

    def output(self, argv: Sequence[str]) -> str:
        try:
            return subprocess.run(list(argv), capture_output=True, text=True, timeout=HELP_TIMEOUT_S).stdout
        except subprocess.SubprocessError as exc:  # a timeout: said as the OSError the contract names
            raise OSError(str(exc)) from None

    def squashfs_image(self, path: str) -> str | None:
        return check_image(path).sha256

    def sif_image(self, path: str) -> str:
        return verify_sif(path)


def check_container_runtime(spec: RuntimeSpec, backend: str, host: Host | None = None) -> str | None:
    """The runtime's own preflight (plan/runtimes/): what it needs on this host, then its image;
    returns the image's sha256 for launch.json (None without an image)."""
    return runtime_named(spec.runtime).preflight(spec, backend, host or LocalHost())


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
    spec: RuntimeSpec,
    backend: str,
    gpus: Sequence[str],
    flag: str = "--gpu-device ",
    host: Host | None = None,
) -> None:
    """The runtime's check that this host can give its trials the GPUs (e.g. `--runtime process` on a
    local pool: this host's nvidia-smi on the trials' PATH).

    `flag`: what gave the GPUs, as the message names it ("--gpu-device " or "CUDA_DEVICE=")."""
    runtime_named(spec.runtime).check_gpus(backend, gpus, spec, flag, host or LocalHost())


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
