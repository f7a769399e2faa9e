"""Launching sweeps: per-trial state machine, local worker pool, Slurm job arrays via submitit, status data.

Re-exports the entry points the CLI calls, imported when first used (a dry run that only parses
`--gpu-device` does not load the launcher); see docs/launching.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mle_world.launch.launcher import run_sweep as run_sweep
    from mle_world.launch.local.pool import parse_gpu_devices as parse_gpu_devices
    from mle_world.launch.preflight import check_prepared as check_prepared
    from mle_world.launch.slurm.backend import write_sbatch_preview as write_sbatch_preview

_EXPORTS = {
    "parse_gpu_devices": "mle_world.launch.local.pool",
    "check_prepared": "mle_world.launch.preflight",
    "run_sweep": "mle_world.launch.launcher",
    "write_sbatch_preview": "mle_world.launch.slurm.backend",
}
__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
