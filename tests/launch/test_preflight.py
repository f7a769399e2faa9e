"""Preflight checks of the container runtime: one line naming what is missing.

Reads PATH (a temporary one with a stand-in `srun`); writes images under tmp_path.
"""

from __future__ import annotations

import hashlib
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
APPTAINER = RuntimeSpec("apptainer")


def _without(*missing: str) -> LocalHost:
    """This host, with a PATH where `missing` are not found and every other program is."""
    return LocalHost(lambda name, path=None: None if name in missing else f"/usr/bin/{name}")


def _sif(path: Path, magic: bytes = b"SIF_MAGIC") -> Path:
    """A file with a SIF's global header start: the 32-byte launch script, then the magic."""
    path.write_bytes(b"#!/usr/bin/env run-singularity\n".ljust(32, b"\0") + magic + b"\x0001\0" + b"x" * 64)
    return path


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


def test_apptainer_needs_apptainer_or_singularity_for_a_local_pool() -> None:
    with pytest.raises(UserError, match="--runtime apptainer: neither apptainer nor singularity") as caught:
        check_container_runtime(APPTAINER, "local", _without("apptainer", "singularity"))
    assert "\n" not in str(caught.value)
    assert check_container_runtime(APPTAINER, "local", _without("apptainer")) is None  # singularity does
    assert check_container_runtime(APPTAINER, "local", _without("singularity")) is None
    check_container_runtime(APPTAINER, "slurm", _without("apptainer", "singularity"))  # nodes: not here


def test_apptainer_takes_a_sif_image_and_records_its_sha256(tmp_path: Path) -> None:
    image = _sif(tmp_path / "aide.sif")
    spec = RuntimeSpec("apptainer", image=str(image))
    sha = check_container_runtime(spec, "slurm", _without())
    assert sha == hashlib.sha256(image.read_bytes()).hexdigest()


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (lambda p: p, "does not exist (build it from the .sqsh"),
        (lambda p: _sif(p, magic=b"hsqs_NOPE"), "is not a SIF image (bytes 32-40 b'hsqs_NOPE'"),
        (lambda p: (p.write_bytes(b"hsqs" + b"\0" * 200), p)[1], "is not a SIF image"),
        (lambda p: (p.mkdir(), p)[1], "is not a regular file"),
    ],
)
def test_apptainer_refuses_what_is_no_sif_image(tmp_path: Path, make, needle: str) -> None:  # type: ignore[no-untyped-def]
    image = make(tmp_path / "aide.sif")
    with pytest.raises(UserError) as caught:
        check_container_runtime(RuntimeSpec("apptainer", image=str(image)), "local", _without())
    line = str(caught.value)
    assert "\n" not in line and line.startswith(f"--enroot-image {image}: ") and needle in line


@pytest.mark.parametrize("runtime", ["apptainer", "process"])
def test_a_local_pool_given_gpus_needs_nvidia_smi_here(runtime: str) -> None:
    """Both give trials this host's nvidia-smi (`--nv` binds it); enroot and pyxis bring their own hook."""
    spec = RuntimeSpec(runtime)
    with pytest.raises(UserError, match="--gpu-device 0,1: this host has no nvidia-smi"):
        check_host_gpus(spec, "local", ["0", "1"], host=_without("nvidia-smi"))
    check_host_gpus(spec, "local", [], host=_without("nvidia-smi"))
    check_host_gpus(spec, "slurm", ["0"], host=_without("nvidia-smi"))
    check_host_gpus(spec, "local", ["0"], host=_without())
    check_host_gpus(RuntimeSpec("enroot"), "local", ["0"], host=_without("nvidia-smi"))
