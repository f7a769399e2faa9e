"""Launching sweeps: per-trial state machine, local worker pool, Slurm job arrays via submitit, status.

Re-exports the entry points the CLI calls; see docs/launching.md.
"""

from mle_world.launch.local import parse_gpu_devices as parse_gpu_devices
from mle_world.launch.run import check_prepared as check_prepared
from mle_world.launch.run import run_sweep as run_sweep
from mle_world.launch.run import write_sbatch_preview as write_sbatch_preview
from mle_world.launch.status import show_status as show_status
