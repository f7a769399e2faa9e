"""The GPU part of a trial's environment, from its allocation (launch/gpus.py).

Reads nothing; the Slurm test submits to the real local cluster and writes its probe under tmp_path.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

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


# Environments as the local Slurm's batch step gives them (scripts/slurm/local_cluster.sh, no
# ConstrainDevices): a job holding the node's GPUs 2 and 3 sees them under their own ids.
JOB_OF_GPUS_2_3 = {"CUDA_VISIBLE_DEVICES": "2,3", "SLURM_JOB_GPUS": "2,3", "GPU_DEVICE_ORDINAL": "2,3"}
# With ConstrainDevices=yes the job's cgroup holds only its GPUs and CUDA renumbers them from 0.
CONSTRAINED_JOB_OF_GPUS_4_TO_7 = {"CUDA_VISIBLE_DEVICES": "0,1,2,3", "SLURM_JOB_GPUS": "4,5,6,7"}


def test_a_local_pool_in_a_job_gives_each_trial_its_own_gpu_not_the_jobs() -> None:
    """The local pool inside `sbatch --gres=gpu:4` (README: --n-workers 4 --gpu-device 0-3): every trial
    got NVIDIA_VISIBLE_DEVICES = all of SLURM_JOB_GPUS, so the hook mounted the job's four GPUs in
    every container, numbered from 0, and every trial ran on the first."""
    assert gpu_environment("3", JOB_OF_GPUS_2_3)["NVIDIA_VISIBLE_DEVICES"] == "3"
    assert gpu_environment("2", JOB_OF_GPUS_2_3)["NVIDIA_VISIBLE_DEVICES"] == "2"
    hooks = [gpu_environment(i, CONSTRAINED_JOB_OF_GPUS_4_TO_7)["NVIDIA_VISIBLE_DEVICES"] for i in "0123"]
    assert hooks == ["4", "5", "6", "7"]
    assert gpu_environment("1,3", CONSTRAINED_JOB_OF_GPUS_4_TO_7)["NVIDIA_VISIBLE_DEVICES"] == "5,7"
    assert gpu_environment("2", CONSTRAINED_JOB_OF_GPUS_4_TO_7)["CUDA_VISIBLE_DEVICES"] == "2"


def test_a_slurm_array_task_maps_its_renumbered_gpu_to_the_nodes_id() -> None:
    # The Slurm backend: the task's own CUDA_VISIBLE_DEVICES is its GPU.
    env = {"CUDA_VISIBLE_DEVICES": "0", "SLURM_JOB_GPUS": "3"}
    assert gpu_environment(env["CUDA_VISIBLE_DEVICES"], env)["NVIDIA_VISIBLE_DEVICES"] == "3"
    assert (
        gpu_environment("2", {"CUDA_VISIBLE_DEVICES": "2", "SLURM_JOB_GPUS": "2"})["NVIDIA_VISIBLE_DEVICES"]
        == "2"
    )


@pytest.mark.slurm
def test_in_a_real_job_each_trial_gpu_maps_to_its_node_id(slurm_cluster: None, tmp_path: Path) -> None:
    """A job holding two of the local cluster's four GPUs (a first job holds the other two): the
    mapping is taken from the environment Slurm really gives a batch step."""
    probe = (
        "import json, os\n"
        "from mle_world.launch.gpus import gpu_environment\n"
        "seen = os.environ['CUDA_VISIBLE_DEVICES'].split(',')\n"
        "hooks = [gpu_environment(i, os.environ)['NVIDIA_VISIBLE_DEVICES'] for i in seen]\n"
        "print(json.dumps({'job': os.environ['SLURM_JOB_GPUS'], 'hooks': hooks}))\n"
    )
    script = tmp_path / "probe.py"
    script.write_text(probe)
    out = tmp_path / "probe.out"
    sbatch = ["sbatch", "--parsable", "--partition=gpu", "--gres=gpu:2", "--time=2"]
    blocker = subprocess.run(
        [*sbatch, "--output=/dev/null", "--wrap=sleep 60"], capture_output=True, text=True, check=True
    ).stdout
    try:
        subprocess.run(
            [*sbatch, "--wait", f"--output={out}", f"--wrap={sys.executable} {script}"],
            capture_output=True, text=True, check=True, timeout=120,
        )  # fmt: skip
    finally:
        subprocess.run(["scancel", blocker.strip().split(";")[0]], check=False)
    seen = json.loads(out.read_text().strip().splitlines()[-1])
    job = seen["job"].split(",")
    assert len(job) == 2 and seen["hooks"] == job  # one node id per trial GPU, never the job's list
