"""The registry of runtimes: every runtime's one instance, by name, in the order `--runtime` lists them.

Reads and writes nothing. A new runtime is a class (a module beside this one), a template in
`plan/templates/` and its entry below.
"""

from __future__ import annotations

from mle_world.errors import UserError
from mle_world.plan.runtimes.apptainer import Apptainer
from mle_world.plan.runtimes.base import Runtime
from mle_world.plan.runtimes.enroot import Enroot
from mle_world.plan.runtimes.process import Process
from mle_world.plan.runtimes.pyxis import Pyxis

RUNTIMES: dict[str, Runtime] = {r.name: r for r in (Enroot(), Pyxis(), Process(), Apptainer())}
DEFAULT = "enroot"
NAMES: tuple[str, ...] = tuple(RUNTIMES)


def runtime_named(name: str) -> Runtime:
    """The runtime called `name`; one line naming the flag and the choices otherwise."""
    runtime = RUNTIMES.get(name)
    if runtime is None:
        raise UserError(f"--runtime: unknown runtime {name!r} (choose from: {', '.join(NAMES)})")
    return runtime


def image_help() -> str:
    """Which image file each runtime takes: ".sqsh for enroot and pyxis, .sif for apptainer"."""
    suffixes = dict.fromkeys(RUNTIMES[name].image_suffix for name in with_image())
    return ", ".join(
        f"{suffix} for {listed(tuple(n for n in with_image() if RUNTIMES[n].image_suffix == suffix))}"
        for suffix in suffixes
    )


def with_image() -> tuple[str, ...]:
    """The runtimes that start from `--enroot-image`."""
    return tuple(name for name, runtime in RUNTIMES.items() if runtime.needs_image)


def on_host() -> tuple[str, ...]:
    """The runtimes that run the host's Python (the only ones --no-sandbox applies to)."""
    return tuple(name for name, runtime in RUNTIMES.items() if runtime.on_host)


def listed(names: tuple[str, ...]) -> str:
    """Names for a message or a help text: "enroot, pyxis and apptainer"."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
