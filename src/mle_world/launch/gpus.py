"""The GPU part of a trial's environment, from the GPUs the launcher gave it.

Reads the launcher's environment (Slurm's SLURM_STEP_GPUS / SLURM_JOB_GPUS); writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

CAPABILITIES = "compute,utility"
"""NVIDIA_DRIVER_CAPABILITIES: the hook's default is `utility` alone (nvidia-smi but no libcuda), with
which a framework in the image would not see the GPU."""
NO_GPU = "void"
"""NVIDIA_VISIBLE_DEVICES without GPUs: Enroot's NVIDIA hook then does nothing (with `all` it needs
nvidia-container-cli and fails the start on a node without it)."""


def gpu_environment(gpu: str | None, env: Mapping[str, str]) -> dict[str, str]:
    """CUDA_VISIBLE_DEVICES and NVIDIA_VISIBLE_DEVICES for a trial holding `gpu` (ids, or None).

    Under Slurm CUDA_VISIBLE_DEVICES may be renumbered within the job's cgroup; the hook wants the
    node's ids, which Slurm gives in SLURM_STEP_GPUS / SLURM_JOB_GPUS.
    """
    if not gpu:
        return {"NVIDIA_VISIBLE_DEVICES": NO_GPU, "NVIDIA_DRIVER_CAPABILITIES": CAPABILITIES}
    node_ids = env.get("SLURM_STEP_GPUS") or env.get("SLURM_JOB_GPUS") or gpu
    return {
        "CUDA_VISIBLE_DEVICES": gpu,
        "NVIDIA_VISIBLE_DEVICES": node_ids,
        "NVIDIA_DRIVER_CAPABILITIES": CAPABILITIES,
    }
