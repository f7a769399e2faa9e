"""The GPU check at the start of every trial that was given GPUs, run inside the container.

Reads NVIDIA_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES, `nvidia-smi` and (when installed) torch in a
child process; writes nothing. A trial whose GPU is unusable fails at once instead of training for
hours on the CPU (e.g. CUDA 13 torch wheels on a node whose driver predates CUDA 13).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Mapping

from mle_world.records import GpuInfo

NO_GPU_VALUES = ("", "void", "none")
"""NVIDIA_VISIBLE_DEVICES values that give the container no GPU (Enroot's NVIDIA hook semantics)."""
TIMEOUT_S = 120.0
FRAMEWORK_PROBE = (
    "import torch; ok = torch.cuda.is_available(); "
    "print(ok, torch.__version__, torch.version.cuda, torch.cuda.device_count() if ok else 0)"
)


class GpuUnusableError(RuntimeError):
    """The trial was given GPUs that the driver or the framework cannot use (one line)."""


def gpus_given(env: Mapping[str, str]) -> bool:
    """Whether the launcher gave this trial GPUs (NVIDIA_VISIBLE_DEVICES wins, else CUDA_VISIBLE_DEVICES)."""
    nvidia = env.get("NVIDIA_VISIBLE_DEVICES")
    if nvidia is not None:
        return nvidia.strip().lower() not in NO_GPU_VALUES
    return bool(env.get("CUDA_VISIBLE_DEVICES", "").strip())


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except FileNotFoundError:
        raise GpuUnusableError(f"{argv[0]} not found (the NVIDIA container hook did not run)") from None
    except subprocess.TimeoutExpired:
        raise GpuUnusableError(f"{argv[0]} did not answer within {TIMEOUT_S:.0f} s") from None


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0][:300] if lines else "no output"


def check_gpu(python: str = sys.executable) -> GpuInfo:
    """Query the driver, then the framework if the image has one; raise GpuUnusableError on failure."""
    smi = _run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"])
    if smi.returncode != 0:
        raise GpuUnusableError(
            f"nvidia-smi failed (exit {smi.returncode}): {_first_line(smi.stdout + smi.stderr)}"
        )
    rows = [[cell.strip() for cell in line.split(",")] for line in smi.stdout.splitlines() if line.strip()]
    if not rows or len(rows[0]) < 2:
        raise GpuUnusableError(f"nvidia-smi lists no GPU: {_first_line(smi.stdout + smi.stderr)}")
    info = GpuInfo(names=tuple(row[0] for row in rows), driver=rows[0][1])
    if importlib.util.find_spec("torch") is None:
        return info
    probe = _run([python, "-c", FRAMEWORK_PROBE])
    words = probe.stdout.split()
    if probe.returncode != 0 or len(words) != 4:
        raise GpuUnusableError(f"torch could not be checked: {_first_line(probe.stderr or probe.stdout)}")
    available, version, cuda, count = words
    info = info.model_copy(update={"framework": f"torch {version} (CUDA {cuda})"})
    if available != "True":
        raise GpuUnusableError(
            f"torch {version} built for CUDA {cuda} sees no GPU with driver {info.driver} "
            f"({', '.join(info.names)}): rebuild the image with a matching TORCH_CUDA"
        )
    return info.model_copy(update={"framework_devices": int(count)})
