"""The real container runtimes for tests: Enroot, pyxis on the local Slurm, and the CI-sized image.

Reads PATH, `srun --help` and the image cache; runs scripts/image/build_ci_image.sh (which writes the
image under ~/.cache/mle-world/images). The fixtures in tests/conftest.py wrap these helpers.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
INSTALL = "bash scripts/install_runtimes.sh"
BUILD_IMAGE = REPO / "scripts" / "image" / "build_ci_image.sh"
CLUSTER_UP = "bash scripts/slurm/local_cluster.sh up --pyxis"


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def unavailable(why: str) -> None:
    """Fail under CI or when the runtime is half there (installed but broken); skip otherwise."""
    if in_ci() or shutil.which("enroot") is not None:
        pytest.fail(why)
    pytest.skip(why)


def enroot_problem() -> str | None:
    """None when the real enroot can start a squashfs image here, else one line saying why not."""
    if os.geteuid() != 0:
        return "the real-runtime tests run as root (enroot create/start of the CI image)"
    if shutil.which("enroot") is None:
        return f"enroot not found: run `{INSTALL}`"
    if shutil.which("squashfuse") is None:
        return "squashfuse not found (enroot start IMAGE.sqsh needs it): apt-get install squashfuse"
    version = subprocess.run(["enroot", "version"], capture_output=True, text=True, timeout=30)
    if version.returncode != 0:
        return f"`enroot version` failed: {version.stderr.strip()[:200]}"
    return None


def pyxis_problem() -> str | None:
    """None when srun on the local Slurm takes pyxis' --container-image, else one line."""
    if shutil.which("srun") is None:
        return f"srun not found: run `{CLUSTER_UP}`"
    helptext = subprocess.run(["srun", "--help"], capture_output=True, text=True, timeout=30).stdout
    if "--container-image" not in helptext:
        return f"srun has no --container-image (pyxis not enabled): run `{CLUSTER_UP}`"
    return None


def build_ci_image() -> Path:
    """The CI image, built by the real build script on first use and cached by its inputs' hash."""
    proc = subprocess.run(["bash", str(BUILD_IMAGE)], capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        pytest.fail(
            f"scripts/image/build_ci_image.sh failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
        )
    image = Path(proc.stdout.strip().splitlines()[-1])
    assert image.is_file(), proc.stdout
    return image


def runtime_options(runtime: str, image: Path) -> list[str]:
    """CLI flags that run a sweep's trials in `runtime` with `image` (enroot: local, pyxis: slurm)."""
    backend = "slurm" if runtime == "pyxis" else "local"
    return ["--runtime", runtime, "--enroot-image", str(image), "--backend", backend]


# --- a test double of the GPU path: what cannot run here (no GPU, no libnvidia-container) ----------

FAKE_NVIDIA_CLI = """#!/bin/sh
# Test double of libnvidia-container's CLI. Enroot's 98-nvidia.sh hook runs it on the host (found in
# the image's /usr/local/bin, which the hook adds to PATH) as `configure ARGS... ROOTFS`; it records
# its arguments in the rootfs, where the nvidia-smi double reads them. FAKE_GPU_BROKEN=1 in the
# launcher's environment marks the GPU unusable.
for arg in "$@"; do rootfs=$arg; done
mkdir -p "$rootfs/etc/fake-nvidia"
printf '%s\\n' "$@" >"$rootfs/etc/fake-nvidia/configure-args"
if [ -n "${FAKE_GPU_BROKEN:-}" ]; then : >"$rootfs/etc/fake-nvidia/broken"; fi
"""

FAKE_NVIDIA_SMI = """#!/bin/sh
# Test double of nvidia-smi: answers like the real one only when the hook configured this container
# for compute (the driver's libcuda would be mounted), else fails as on a broken node.
args=/etc/fake-nvidia/configure-args
if [ ! -f "$args" ] || [ -f /etc/fake-nvidia/broken ]; then
    echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver." >&2
    exit 9
fi
if ! grep -qx -- --compute "$args"; then
    echo "NVIDIA-SMI: no compute capability configured (NVIDIA_DRIVER_CAPABILITIES)" >&2
    exit 9
fi
echo "Fake Test GPU, 535.54.03"
"""


FAST_SQUASH = ("-comp", "zstd", "-Xcompression-level", "1")


def fake_gpu_image(ci_image: Path) -> Path:
    """The CI image plus the NVIDIA hook's test doubles, beside it in the cache (built once)."""
    digest = hashlib.sha256((FAKE_NVIDIA_CLI + FAKE_NVIDIA_SMI).encode()).hexdigest()[:12]
    out = ci_image.with_name(f"{ci_image.stem}.fakegpu-{digest}.sqsh")
    with open(ci_image.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if out.exists():
            return out
        with tempfile.TemporaryDirectory(dir=ci_image.parent, prefix=".fakegpu.") as tmp:
            root = Path(tmp) / "root"
            subprocess.run(["unsquashfs", "-q", "-n", "-d", str(root), str(ci_image)], check=True)
            bindir = root / "usr" / "local" / "bin"
            for name, text in (("nvidia-container-cli", FAKE_NVIDIA_CLI), ("nvidia-smi", FAKE_NVIDIA_SMI)):
                (bindir / name).write_text(text)
                (bindir / name).chmod(0o755)
            partial = Path(tmp) / "image.sqsh"
            subprocess.run(
                ["mksquashfs", str(root), str(partial), "-all-root", "-quiet", "-noappend", *FAST_SQUASH],
                check=True,
                stdout=subprocess.DEVNULL,
            )
            partial.replace(out)
    return out
