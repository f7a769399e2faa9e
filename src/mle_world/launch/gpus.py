"""The GPU part of a trial's environment, from the GPUs the launcher gave it.

Reads the launcher's environment (CUDA_VISIBLE_DEVICES, Slurm's SLURM_STEP_GPUS / SLURM_JOB_GPUS); writes
nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

CAPABILITIES = "compute,utility"
"""NVIDIA_DRIVER_CAPABILITIES: the hook's default is `utility` alone (nvidia-smi but no libcuda), with
which a framework in the image would not see the GPU."""
NO_GPU = "void"
"""NVIDIA_VISIBLE_DEVICES without GPUs: Enroot's NVIDIA hook then does nothing (with `all` it needs
nvidia-container-cli and fails the start on a node without it)."""


def _ids(value: str | None) -> list[str]:
    return [part.strip() for part in (value or "").split(",") if part.strip()]


def node_gpu_ids(gpu: str, env: Mapping[str, str]) -> str:
    """The node's ids (what the NVIDIA hook mounts) of the trial's GPUs `gpu`, given as the launcher
    sees them (values of its CUDA_VISIBLE_DEVICES, e.g. --gpu-device 2,3 or a job's own GPU).

    In a Slurm job CUDA_VISIBLE_DEVICES may be renumbered (0..n-1 within the job's cgroup) while
    SLURM_STEP_GPUS / SLURM_JOB_GPUS list the node's ids in the same order: a trial's GPU is the node
    id at its position. Outside Slurm, or when the lists do not line up, the ids are the node's.
    """
    wanted = _ids(gpu)
    nodes = _ids(env.get("SLURM_STEP_GPUS") or env.get("SLURM_JOB_GPUS"))
    visible = _ids(env.get("CUDA_VISIBLE_DEVICES"))
    if nodes and len(visible) == len(nodes) and all(i in visible for i in wanted):
        return ",".join(nodes[visible.index(i)] for i in wanted)
    if nodes and not visible and len(wanted) == len(nodes):
        return ",".join(nodes)  # the job's GPUs, all of them the trial's
    return ",".join(wanted)


def gpu_environment(gpu: str | None, env: Mapping[str, str]) -> dict[str, str]:
    """CUDA_VISIBLE_DEVICES and NVIDIA_VISIBLE_DEVICES for a trial holding `gpu` (ids, or None) in a
    launcher whose environment is `env`."""
    if not gpu:
        return {"NVIDIA_VISIBLE_DEVICES": NO_GPU, "NVIDIA_DRIVER_CAPABILITIES": CAPABILITIES}
    return {
        "CUDA_VISIBLE_DEVICES": gpu,
        "NVIDIA_VISIBLE_DEVICES": node_gpu_ids(gpu, env),
        "NVIDIA_DRIVER_CAPABILITIES": CAPABILITIES,
    }
