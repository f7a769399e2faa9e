"""The GPU check at the start of a trial, with test doubles of nvidia-smi and torch (no GPU here).

Reads a temporary PATH and PYTHONPATH; writes the doubles under tmp_path.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from mle_world.agent.gpu import GpuUnusableError, check_gpu, gpus_given

SMI = "#!/bin/sh\necho 'NVIDIA A100-SXM4-80GB, 550.54.15'\necho 'NVIDIA A100-SXM4-80GB, 550.54.15'\n"
TORCH = """__version__ = "2.13.0"
class version:
    cuda = "13.0"
class cuda:
    @staticmethod
    def is_available():
        return {available}
    @staticmethod
    def device_count():
        return 2
"""


@pytest.fixture
def doubles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "nvidia-smi").write_text(SMI)
    (bindir / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    return tmp_path


def _torch(root: Path, available: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    (root / "torch").mkdir(exist_ok=True)
    (root / "torch" / "__init__.py").write_text(TORCH.format(available=available))
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setenv("PYTHONPATH", str(root))


def test_driver_and_framework_are_recorded(doubles: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _torch(doubles, True, monkeypatch)
    info = check_gpu(sys.executable)
    assert info.names == ("NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB")
    assert info.driver == "550.54.15"
    assert info.framework == "torch 2.13.0 (CUDA 13.0)" and info.framework_devices == 2


def test_framework_that_sees_no_gpu_fails_in_one_line(doubles: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """CUDA 13 wheels on a driver that predates CUDA 13: torch sees no GPU although nvidia-smi does."""
    _torch(doubles, False, monkeypatch)
    with pytest.raises(GpuUnusableError) as caught:
        check_gpu(sys.executable)
    message = str(caught.value)
    assert message == (
        "torch 2.13.0 built for CUDA 13.0 sees no GPU with driver 550.54.15 "
        "(NVIDIA A100-SXM4-80GB, NVIDIA A100-SXM4-80GB): rebuild the image with a matching TORCH_CUDA"
    )


def test_missing_nvidia_smi_means_the_hook_did_not_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(GpuUnusableError, match="nvidia-smi not found"):
        check_gpu(sys.executable)


@pytest.mark.parametrize(
    ("env", "given"),
    [
        ({"NVIDIA_VISIBLE_DEVICES": "void", "CUDA_VISIBLE_DEVICES": "0"}, False),
        ({"NVIDIA_VISIBLE_DEVICES": "1"}, True),
        ({"NVIDIA_VISIBLE_DEVICES": "all"}, True),
        ({"NVIDIA_VISIBLE_DEVICES": "none"}, False),
        ({"CUDA_VISIBLE_DEVICES": "2,3"}, True),
        ({"CUDA_VISIBLE_DEVICES": ""}, False),
        ({}, False),
    ],
)
def test_which_trials_were_given_gpus(env: dict[str, str], given: bool) -> None:
    assert gpus_given(env) is given
