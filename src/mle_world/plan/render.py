"""Rendering of each trial's command under its runtime (plan/runtimes/: one class and template each).

Pure: reads templates shipped in the package; returns shell command strings, writes nothing.
"""

from __future__ import annotations

import os
import re
from functools import cache
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


@cache
def _normal(path: str) -> str:
    """`path` as pathlib spells it (`a//b/./c/` → `a/b/c`), once per distinct path: a plan asks a few
    times per trial about the same few roots."""
    return str(PurePosixPath(path))


def _inside(path: str, root: str) -> bool:
    """`path` is `root` or lies under it, lexically (as `root in path.parents`, without building every
    parent of `path`). Both as pathlib spells them."""
    inner, outer = _normal(path), _normal(root)
    if outer == ".":  # the parent of every relative path
        return not inner.startswith("/")
    return inner == outer or inner.startswith(outer if outer.endswith("/") else outer + "/")


def check_runtime(runtime: RuntimeSpec, trial: PlannedTrial) -> None:
    """Refuse paths the runtime cannot express, and a sandbox that would show private answers. What
    depends on the runtime (or on it and a task's data dir) alone is checked once (`functools.cache`:
    a refusal is not cached, it is raised again); a plan of 2,380 trials checked it 2,380 times."""
    kind = runtime_named(runtime.runtime)
    _check_env_names(runtime.env_names)
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
    private = str(trial.private_dir.absolute())
    _check_mounts(runtime.mounts, private)
    _check_private_hidden(runtime, trial, private)


@cache
def _check_env_names(names: tuple[str, ...]) -> None:
    for name in names:
        if not ENV_NAME.match(name):
            raise UserError(f"environment variable name {name!r} is not a valid identifier")


@cache
def _check_mounts(mounts: tuple[tuple[str, str], ...], private: str) -> None:
    for src, _ in mounts:
        if _inside(private, src) or _inside(src, private):
            raise UserError(
                f"cluster config container.mounts: {src} would show the task's data dir inside the "
                "trial (private answers); mount something else"
            )


def _check_private_hidden(runtime: RuntimeSpec, trial: PlannedTrial, private: str) -> None:
    """The private answers must not lie under any path the trial is shown (nor contain one)."""
    for label, path in (("output dir", trial.trial_dir), ("the public data", trial.public_dir)):
        _refuse_overlap(private, label, str(path.absolute()))
    _check_shown_hidden(runtime, private, os.getcwd())


@cache
def _check_shown_hidden(runtime: RuntimeSpec, private: str, cwd: str) -> None:
    """The mounts and the host paths the runtime shows, against one task's private answers (a relative
    one taken from `cwd`)."""
    shown = {f"mount {src}": src for src, _ in runtime.mounts}
    shown.update({root: root for root in runtime_named(runtime.runtime).shown_paths(runtime)})
    for label, path in shown.items():
        _refuse_overlap(private, label, os.path.join(cwd, _normal(path)))


def _refuse_overlap(private: str, label: str, path: str) -> None:
    if _inside(private, path) or _inside(path, private):
        raise UserError(
            f"--data-dir: {private} overlaps {label} ({_normal(path)}), which the trial can see; "
            "move the data dir so private answers stay hidden"
        )


@cache
def _spec_path(trial_dir: str) -> str:
    return str(PurePosixPath(trial_dir) / layout.SPEC)


def agent_argv(runtime: RuntimeSpec, paths: TrialPaths) -> list[str]:
    return [runtime.python, "-m", "mle_world.agent", "--spec", _spec_path(paths.trial_dir)]


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
