"""Rendering of each trial's container command from the Jinja2 templates in `templates/`.

Pure: reads templates shipped in the package; returns shell command strings, writes nothing.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Literal

import jinja2

from mle_world.errors import UserError
from mle_world.plan.sweep import PlannedTrial
from mle_world.records import TrialPaths

Runtime = Literal["enroot", "pyxis", "process"]
RUNTIMES: tuple[Runtime, ...] = ("enroot", "pyxis", "process")
CONTAINER_TRIAL = "/home/trial"
CONTAINER_DATA = "/home/data"
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc")
"""What the sandbox shows of the host besides the Python prefixes: the image's equivalent."""
GPU_NAMES = ("NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES")
"""Set by the launcher from the trial's GPUs (launch/gpus.py): Enroot's NVIDIA hook mounts exactly
those, renumbered from 0 inside, so CUDA_VISIBLE_DEVICES (host ids) is not passed to enroot."""
GPU_DEVICES = tuple(f"/dev/nvidia{i}" for i in range(8)) + (
    "/dev/nvidiactl",
    "/dev/nvidia-uvm",
    "/dev/nvidia-uvm-tools",
)


@dataclass(frozen=True)
class RuntimeSpec:
    """How trials run: container runtime, image, sandbox and what crosses into the container."""

    runtime: Runtime
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
    """pyxis: trials get GPUs (the launcher's NVIDIA_VISIBLE_DEVICES, their node ids; else void)."""
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
        )
    )

    def __post_init__(self) -> None:
        self.env.filters["q"] = lambda value: shlex.quote(str(value))

    def render(self, template: str, **context: object) -> str:
        return self.env.get_template(template).render(**context).strip()


def view_paths(runtime: RuntimeSpec, trial_dir: Path, public_dir: Path) -> TrialPaths:
    """Where the agent sees its trial dir and data: fixed container paths unless unsandboxed."""
    if runtime.runtime == "process" and not runtime.sandbox:
        return TrialPaths(trial_dir=str(trial_dir), data_dir=str(public_dir))
    return TrialPaths(trial_dir=CONTAINER_TRIAL, data_dir=CONTAINER_DATA)


def _inside(path: Path, root: str) -> bool:
    """`path` is `root` or lies under it, lexically (as `root in path.parents`, without building every
    parent of `path`: the dry run asks this a few times per trial)."""
    inner, outer = str(path), str(Path(root))
    if outer == ".":  # the parent of every relative path
        return not inner.startswith("/")
    return inner == outer or inner.startswith(outer if outer.endswith("/") else outer + "/")


def check_runtime(runtime: RuntimeSpec, trial: PlannedTrial) -> None:
    """Refuse paths the runtime cannot express, and a sandbox that would show private answers."""
    for name in runtime.env_names:
        if not ENV_NAME.match(name):
            raise UserError(f"environment variable name {name!r} is not a valid identifier")
    paths = {"output dir": trial.trial_dir, "--data-dir": trial.public_dir}
    for label, path in paths.items():
        text = str(path)
        if "\n" in text or "\0" in text:
            raise UserError(f"{label}: path {text!r} contains a newline")
        if runtime.runtime == "enroot" and ":" in text:
            raise UserError(f"{label}: enroot mounts cannot express ':' in {text!r}")
        if runtime.runtime == "pyxis" and ("," in text or ":" in text):
            raise UserError(f"{label}: pyxis --container-mounts cannot express ',' or ':' in {text!r}")
    if runtime.runtime in ("enroot", "pyxis") and not runtime.image:
        raise UserError(f"--enroot-image is required with --runtime {runtime.runtime}")
    for src, _ in runtime.mounts:
        private = trial.private_dir.absolute()
        if _inside(private, src) or _inside(Path(src), str(private)):
            raise UserError(
                f"cluster config container.mounts: {src} would show the task's data dir inside the "
                "trial (private answers); mount something else"
            )
    _check_private_hidden(runtime, trial)


def _check_private_hidden(runtime: RuntimeSpec, trial: PlannedTrial) -> None:
    """The private answers must not lie under any path the trial is shown (nor contain one)."""
    private = trial.private_dir.absolute()
    shown = {"output dir": trial.trial_dir, "the public data": trial.public_dir}
    shown.update({f"mount {src}": Path(src) for src, _ in runtime.mounts})
    if runtime.runtime == "process" and runtime.sandbox:
        shown.update({root: Path(root) for root in SYSTEM_PATHS + runtime.host_paths})
    for label, path in shown.items():
        path = path.absolute()
        if _inside(private, str(path)) or _inside(path, str(private)):
            raise UserError(
                f"--data-dir: {private} overlaps {label} ({path}), which the trial can see; "
                "move the data dir so private answers stay hidden"
            )


def agent_argv(runtime: RuntimeSpec, paths: TrialPaths) -> list[str]:
    spec = str(PurePosixPath(paths.trial_dir) / "spec.json")
    return [runtime.python, "-m", "mle_world.agent", "--spec", spec]


def render_command(trial: PlannedTrial, runtime: RuntimeSpec, renderer: Renderer | None = None) -> str:
    """The shell command that runs one trial's agent under the chosen runtime."""
    renderer = renderer or Renderer()
    check_runtime(runtime, trial)
    paths = trial.spec.paths
    argv = agent_argv(runtime, paths)
    common = {
        "trial_dir": str(trial.trial_dir),
        "public_dir": str(trial.public_dir),
        "container_trial": CONTAINER_TRIAL,
        "container_data": CONTAINER_DATA,
        "agent_argv": argv,
        "env_names": list(runtime.env_names),
        "mounts": list(runtime.mounts),
    }
    if runtime.runtime == "enroot":
        names = [n for n in runtime.env_names if n != "CUDA_VISIBLE_DEVICES"] + list(GPU_NAMES)
        env_values = [("PYTHONUNBUFFERED", "1"), *runtime.env_values]
        common["env_names"] = names
        return renderer.render("enroot.sh.j2", image=runtime.image, env_values=env_values, **common)
    if runtime.runtime == "pyxis":
        # The hook mounts what NVIDIA_VISIBLE_DEVICES names. With GPUs it is the launcher's, set per
        # trial to the node's ids of the trial's GPUs (launch/gpus.py), and srun's `--export=ALL` passes
        # it on untouched: Slurm rewrites only CUDA_VISIBLE_DEVICES, to every GPU of the job for each
        # step (`all` gave every trial of a local pool all of them, and each ran on the first). Without
        # GPUs it is `void` on srun's own environment (`--export=ALL,NAME=value` keeps a NAME the
        # environment already has; verified with Slurm 22.05).
        gpu_values = [] if runtime.gpus else [("NVIDIA_VISIBLE_DEVICES", "void")]
        mounts = [f"{trial.trial_dir}:{CONTAINER_TRIAL}", f"{trial.public_dir}:{CONTAINER_DATA}:ro"]
        mounts += [f"{src}:{dst}:ro" for src, dst in runtime.mounts]
        return renderer.render(
            "pyxis.sh.j2",
            image=runtime.image,
            mounts_arg=",".join(mounts),
            step_env=gpu_values,
            env_values=[("PYTHONUNBUFFERED", "1"), *runtime.env_values],
            **common,
        )
    home = paths.trial_dir
    env_values = [
        ("PATH", runtime.path_env),
        ("HOME", home),
        ("LANG", "C.UTF-8"),
        ("PYTHONUNBUFFERED", "1"),
        *runtime.env_values,
    ]
    if runtime.sandbox:
        return renderer.render(
            "process-sandbox.sh.j2",
            env_values=env_values,
            system_paths=list(SYSTEM_PATHS),
            host_paths=list(runtime.host_paths),
            gpu_devices=list(GPU_DEVICES),
            **common,
        )
    return renderer.render("process.sh.j2", env_values=env_values, **common)
