"""Rendering of each trial's command under its runtime (plan/runtimes/: one class and template each).

Pure: reads templates shipped in the package; returns shell command strings, writes nothing.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from mle_world import layout
from mle_world.errors import UserError
from mle_world.plan.runtimes.base import Renderer, RuntimeSpec, TrialView
from mle_world.plan.runtimes.registry import runtime_named
from mle_world.plan.sweep import PlannedTrial
from mle_world.records import TrialPaths

__all__ = ["Renderer", "RuntimeSpec", "check_runtime", "render_command", "view_paths"]

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def view_paths(runtime: RuntimeSpec, trial_dir: Path, public_dir: Path) -> TrialPaths:
    """Where the agent sees its trial dir and data: fixed container paths unless unsandboxed."""
    return runtime_named(runtime.runtime).view_paths(runtime, trial_dir, public_dir)


def _inside(path: Path, root: str) -> bool:
    """`path` is `root` or lies under it, lexically (as `root in path.parents`, without building every
    parent of `path`: the dry run asks this a few times per trial)."""
    inner, outer = str(path), str(Path(root))
    if outer == ".":  # the parent of every relative path
        return not inner.startswith("/")
    return inner == outer or inner.startswith(outer if outer.endswith("/") else outer + "/")


def check_runtime(runtime: RuntimeSpec, trial: PlannedTrial) -> None:
    """Refuse paths the runtime cannot express, and a sandbox that would show private answers."""
    kind = runtime_named(runtime.runtime)
    for name in runtime.env_names:
        if not ENV_NAME.match(name):
            raise UserError(f"environment variable name {name!r} is not a valid identifier")
    paths = {"output dir": trial.trial_dir, "--data-dir": trial.public_dir}
    for label, path in paths.items():
        text = str(path)
        if "\n" in text or "\0" in text:
            raise UserError(f"{label}: path {text!r} contains a newline")
        if any(char in text for char in kind.inexpressible):
            chars = " or ".join(repr(char) for char in kind.inexpressible)
            raise UserError(f"{label}: {kind.mount_syntax} cannot express {chars} in {text!r}")
    if kind.needs_image and not runtime.image:
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
    shown.update({root: Path(root) for root in runtime_named(runtime.runtime).shown_paths(runtime)})
    for label, path in shown.items():
        path = path.absolute()
        if _inside(private, str(path)) or _inside(path, str(private)):
            raise UserError(
                f"--data-dir: {private} overlaps {label} ({path}), which the trial can see; "
                "move the data dir so private answers stay hidden"
            )


def agent_argv(runtime: RuntimeSpec, paths: TrialPaths) -> list[str]:
    spec = str(PurePosixPath(paths.trial_dir) / layout.SPEC)
    return [runtime.python, "-m", "mle_world.agent", "--spec", spec]


def render_command(trial: PlannedTrial, runtime: RuntimeSpec, renderer: Renderer | None = None) -> str:
    """The shell command that runs one trial's agent under the chosen runtime."""
    check_runtime(runtime, trial)
    paths = trial.spec.paths
    view = TrialView(
        trial_dir=trial.trial_dir,
        public_dir=trial.public_dir,
        home=paths.trial_dir,
        agent_argv=tuple(agent_argv(runtime, paths)),
    )
    return runtime_named(runtime.runtime).render(runtime, view, renderer or Renderer())
