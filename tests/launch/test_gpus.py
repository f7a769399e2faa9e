"""The GPU part of a trial's environment, from its allocation (launch/gpus.py).

Reads nothing; writes nothing.
"""

from __future__ import annotations

from mle_world.launch.gpus import gpu_environment


def test_no_gpu_keeps_the_nvidia_hook_out() -> None:
    assert gpu_environment(None, {})["NVIDIA_VISIBLE_DEVICES"] == "void"
    assert gpu_environment("", {"CUDA_VISIBLE_DEVICES": "0"})["NVIDIA_VISIBLE_DEVICES"] == "void"


def test_local_pool_gpu_ids_go_to_the_hook() -> None:
    env = gpu_environment("2", {})
    assert env == {
        "CUDA_VISIBLE_DEVICES": "2",
        "NVIDIA_VISIBLE_DEVICES": "2",
        "NVIDIA_DRIVER_CAPABILITIES": "compute,utility",
    }


def test_under_slurm_the_hook_gets_the_node_ids_not_the_renumbered_ones() -> None:
    env = gpu_environment("0", {"SLURM_STEP_GPUS": "3", "SLURM_JOB_GPUS": "3"})
    assert env["CUDA_VISIBLE_DEVICES"] == "0" and env["NVIDIA_VISIBLE_DEVICES"] == "3"
