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
from mle_world.launch.preflight import check_container_runtime, check_image


def _which_without(missing: str):  # type: ignore[no-untyped-def]
    return lambda name: None if name == missing else f"/usr/bin/{name}"


@pytest.mark.parametrize(
    ("missing", "needle"),
    [("enroot", "enroot not found on PATH"), ("squashfuse", "squashfuse not found on PATH")],
)
def test_enroot_needs_enroot_and_squashfuse_on_the_node(missing: str, needle: str) -> None:
    with pytest.raises(UserError, match=needle) as caught:
        check_container_runtime("enroot", "local", which=_which_without(missing))
    assert "\n" not in str(caught.value)
    check_container_runtime("enroot", "slurm", which=_which_without(missing))  # nodes: not checked here
    check_container_runtime("process", "local", which=_which_without(missing))


def test_pyxis_needs_srun_with_container_image(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    srun = tmp_path / "srun"
    srun.write_text("#!/bin/sh\necho 'Usage: srun [OPTIONS(0)...]'\necho '      --overlap'\n")
    srun.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(UserError, match=r"srun has no --container-image option .* `srun --help \| grep"):
        check_container_runtime("pyxis", "slurm")
    srun.write_text("#!/bin/sh\necho '      --container-image=[USER@][REGISTRY#]IMAGE[:TAG]|PATH'\n")
    check_container_runtime("pyxis", "slurm")


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
