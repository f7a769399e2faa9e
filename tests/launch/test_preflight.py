"""Preflight checks of the container runtime: one line naming what is missing.

Reads PATH (a temporary one with a stand-in `srun`); writes images under tmp_path.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from mle_world.errors import UserError
from mle_world.launch.preflight import LocalHost, check_container_runtime, check_host_gpus, check_image
from mle_world.plan.render import RuntimeSpec

ENROOT = RuntimeSpec("enroot")
PROCESS = RuntimeSpec("process")


def _without(*missing: str) -> LocalHost:
    """This host, with a PATH where `missing` are not found and every other program is."""
    return LocalHost(lambda name, path=None: None if name in missing else f"/usr/bin/{name}")


@pytest.mark.parametrize(
    ("missing", "needle"),
    [("enroot", "enroot not found on PATH"), ("squashfuse", "squashfuse not found on PATH")],
)
def test_enroot_needs_enroot_and_squashfuse_on_the_node(missing: str, needle: str) -> None:
    with pytest.raises(UserError, match=needle) as caught:
        check_container_runtime(ENROOT, "local", _without(missing))
    assert "\n" not in str(caught.value)
    check_container_runtime(ENROOT, "slurm", _without(missing))  # nodes: not checked here
    check_container_runtime(PROCESS, "local", _without(missing))


def test_pyxis_needs_srun_with_container_image(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    srun = tmp_path / "srun"
    srun.write_text("#!/bin/sh\necho 'Usage: srun [OPTIONS(0)...]'\necho '      --overlap'\n")
    srun.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(UserError, match=r"srun has no --container-image option .* `srun --help \| grep"):
        check_container_runtime(RuntimeSpec("pyxis"), "slurm")
    srun.write_text("#!/bin/sh\necho '      --container-image=[USER@][REGISTRY#]IMAGE[:TAG]|PATH'\n")
    assert check_container_runtime(RuntimeSpec("pyxis"), "slurm") is None  # no image given: none hashed


def test_image_whose_manifest_names_another_sha256_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "hostname").write_text("x\n")
    image = tmp_path / "aide.sqsh"
    if shutil.which("mksquashfs") is None:
        pytest.fail("mksquashfs not found: apt-get install squashfs-tools")
    subprocess.run(["mksquashfs", root, image, "-quiet", "-noappend"], check=True, stdout=subprocess.DEVNULL)
    manifest = tmp_path / "aide.sqsh.manifest.json"
    manifest.write_text(json.dumps({"sha256": "0" * 64}))
    with pytest.raises(UserError, match="differs from .*manifest.json; the image changed after it was built"):
        check_image(str(image))
    manifest.unlink()
    assert check_image(str(image)).manifest_path is None


@pytest.mark.parametrize("runtime", ["process"])
def test_a_local_pool_given_gpus_needs_nvidia_smi_here(runtime: str) -> None:
    """Its trials run this host's nvidia-smi; enroot and pyxis bring their own hook."""
    spec = RuntimeSpec(runtime)
    with pytest.raises(UserError, match="--gpu-device 0,1: this host has no nvidia-smi"):
        check_host_gpus(spec, "local", ["0", "1"], host=_without("nvidia-smi"))
    check_host_gpus(spec, "local", [], host=_without("nvidia-smi"))
    check_host_gpus(spec, "slurm", ["0"], host=_without("nvidia-smi"))
    check_host_gpus(spec, "local", ["0"], host=_without())
    check_host_gpus(RuntimeSpec("enroot"), "local", ["0"], host=_without("nvidia-smi"))
