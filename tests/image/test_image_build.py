"""scripts/image/build_aide_enroot.sh run with the real Enroot (scripts/install_runtimes.sh) on a
busybox base image; the CI-sized image (tests/support/runtimekit.py) covers the Debian base and pip.

Reads the script's stderr/stdout and the built squashfs (via unsquashfs); writes the base image,
scratch containers, images and manifests under pytest's tmp_path only.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest
from image_helpers import BUILD_SCRIPT, REPO, require_tool

from mle_world.launch.image import verify_image

TEST_SETUP = Path(__file__).with_name("setup_for_test.sh")


def make_base(path: Path) -> None:
    """A busybox root filesystem as a squashfs image, marked ID=testbase."""
    busybox = Path(require_tool("busybox"))
    root = path.parent / "base-root"
    for sub in ("bin", "etc", "root", "tmp", "proc", "dev", "sys", "opt", "usr/bin"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "bin" / "busybox").write_bytes(busybox.read_bytes())
    (root / "bin" / "busybox").chmod(0o755)
    applets = subprocess.run([busybox, "--list"], capture_output=True, text=True, check=True).stdout.split()
    for applet in applets:
        if applet != "busybox":
            (root / "bin" / applet).symlink_to("busybox")
    (root / "usr" / "bin" / "env").symlink_to("../../bin/busybox")
    (root / "etc" / "os-release").write_text('NAME="test base"\nID=testbase\n')
    (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (root / "etc" / "group").write_text("root:x:0:\n")
    subprocess.run(
        ["mksquashfs", root, path, "-all-root", "-noappend", "-quiet"], check=True, stdout=subprocess.DEVNULL
    )


@pytest.fixture
def build_env(tmp_path: Path, enroot_ready: None) -> dict[str, str]:
    """Environment for a successful build into tmp_path with the real enroot from a busybox base."""
    for tool in ("mksquashfs", "unsquashfs", "rsync", "busybox"):
        require_tool(tool)
    (tmp_path / "out").mkdir()
    base = tmp_path / "base.sqsh"
    make_base(base)
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path / "home"),
        "TMPDIR": str(tmp_path),
        "ENROOT_DATA_PATH": str(tmp_path / "rootfs"),
        "EXPORT_DIR": str(tmp_path / "export"),
        "OUT_SQSH": str(tmp_path / "out" / "aide.sqsh"),
        "BASE_IMAGE": str(base),
        "MIN_EXPORT_GIB": "0",
        "MIN_DATA_GIB": "0",
        "SETUP_SCRIPT": str(TEST_SETUP),
        "HOST_CA_BUNDLE": "none",
    }
    return env


def run_build(env: dict[str, str], **extra: str | None) -> subprocess.CompletedProcess[str]:
    merged = dict(env)
    for key, value in extra.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return subprocess.run(
        ["bash", str(BUILD_SCRIPT)], env=merged, capture_output=True, text=True, timeout=300
    )


def test_build_makes_a_real_squashfs_with_setup_run_inside(build_env) -> None:
    result = run_build(build_env, TORCH_CUDA="cu124")
    assert result.returncode == 0, result.stderr
    out = Path(build_env["OUT_SQSH"])
    assert result.stdout.strip() == str(out)

    # a real squashfs image that unsquashfs reads, holding what setup.sh wrote *inside* the container
    listing = subprocess.run(["unsquashfs", "-l", str(out)], capture_output=True, text=True, check=True)
    assert "squashfs-root/opt/mle-world/setup-ran" in listing.stdout
    assert "squashfs-root/opt/mle-world/src/pyproject.toml" in listing.stdout
    assert "squashfs-root/opt/mle-world/src/image/setup.sh" in listing.stdout
    paths = listing.stdout.splitlines()
    assert "squashfs-root/opt/mle-world/src/.git" not in paths
    assert not [p for p in paths if "__pycache__" in p or p.endswith(".sqsh")]
    ran = subprocess.run(
        ["unsquashfs", "-cat", str(out), "opt/mle-world/setup-ran"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "user=0" in ran.stdout  # run as root (--root), inside the base (setup_for_test.sh checks)
    info = verify_image(out)

    # the manifest beside the image
    manifest = json.loads(Path(f"{out}.manifest.json").read_text())
    assert manifest["sha256"] == info.sha256 == hashlib.sha256(out.read_bytes()).hexdigest()
    assert manifest["size_bytes"] == out.stat().st_size
    assert manifest["base_image"] == build_env["BASE_IMAGE"]
    assert manifest["built_at"].endswith("Z")
    assert manifest["packages"] == [
        "numpy==1.26.4",
        "mle-world @ file:///opt/mle-world/src",
        "torch==2.5.1+cu124",
    ]
    assert manifest["python"] == "Python 3.11.test"
    assert manifest["mlebench_commit"] == "0123456789abcdef"
    assert manifest["torch"] == {"version": "2.5.1+cu124", "cuda": "12.4", "variant": "cu124"}
    git_sha = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True)
    if git_sha.returncode == 0:
        assert manifest["harness"]["git_sha"] == git_sha.stdout.strip()
    assert manifest["setup_script_sha256"] == hashlib.sha256(TEST_SETUP.read_bytes()).hexdigest()
    assert info.manifest_sha256_matches is True

    # the scratch container and temp files are gone
    assert os.listdir(build_env["ENROOT_DATA_PATH"]) == []
    assert os.listdir(build_env["EXPORT_DIR"]) == []
    assert sorted(os.listdir(out.parent)) == ["aide.sqsh", "aide.sqsh.manifest.json"]


def test_existing_sqsh_as_base_and_replacing_the_old_image(build_env, tmp_path) -> None:
    first = run_build(build_env)
    assert first.returncode == 0, first.stderr
    base = tmp_path / "base.sqsh"
    Path(build_env["OUT_SQSH"]).rename(base)
    Path(build_env["OUT_SQSH"]).write_bytes(b"old image")

    second = run_build(build_env, BASE_IMAGE=str(base))
    assert second.returncode == 0, second.stderr
    assert verify_image(build_env["OUT_SQSH"]).compression == "lzo"  # enroot's default options


@pytest.mark.parametrize(
    ("failure", "message"),
    [
        # real failures: mksquashfs refuses the compressor; nothing listens on the registry's port
        ({"ENROOT_SQUASH_OPTIONS": "-comp no-such-compressor"}, "no-such-compressor"),
        ({"BASE_IMAGE": "docker://127.0.0.1:9#test/none:1"}, "Querying registry"),
        ({"SETUP_SCRIPT": "FAILING"}, "recipe broke"),
    ],
)
def test_failed_build_leaves_the_old_image_untouched(build_env, tmp_path, failure, message) -> None:
    out = Path(build_env["OUT_SQSH"])
    out.write_bytes(b"previous image")
    manifest = Path(f"{out}.manifest.json")
    manifest.write_text('{"sha256": "old"}')
    if failure.get("SETUP_SCRIPT") == "FAILING":
        script = tmp_path / "failing_setup.sh"
        script.write_text("#!/bin/sh\necho 'recipe broke' >&2\nexit 3\n")
        failure = {"SETUP_SCRIPT": str(script)}

    result = run_build(build_env, **failure)

    assert result.returncode != 0
    assert message in result.stderr
    assert f"build failed (exit {result.returncode}); {out} was left as it was" in result.stderr
    assert out.read_bytes() == b"previous image"
    assert manifest.read_text() == '{"sha256": "old"}'
    assert sorted(os.listdir(out.parent)) == ["aide.sqsh", "aide.sqsh.manifest.json"]
    assert os.listdir(build_env["ENROOT_DATA_PATH"]) == []  # scratch container removed
    assert os.listdir(build_env["EXPORT_DIR"]) == []  # temp export removed


def test_setup_that_writes_no_freeze_fails(build_env, tmp_path) -> None:
    script = tmp_path / "lazy_setup.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    result = run_build(build_env, SETUP_SCRIPT=str(script))
    assert result.returncode == 1
    assert "did not write /opt/mle-world/build-info/pip-freeze.txt" in result.stderr
    assert not Path(build_env["OUT_SQSH"]).exists()


def _prereq_lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in result.stderr.splitlines() if line]


@pytest.mark.parametrize("var", ["ENROOT_DATA_PATH", "EXPORT_DIR", "OUT_SQSH"])
def test_missing_required_variable(build_env, var) -> None:
    result = run_build(build_env, **{var: None})
    assert result.returncode == 2
    assert _prereq_lines(result) == [
        f"build_aide_enroot.sh: {var} is not set (see the usage at the top of this script)"
    ]


def _path_without(tool: str, tmp_path: Path) -> str:
    """A PATH holding links to the needed tools except `tool`."""
    bindir = tmp_path / f"bin-no-{tool}"
    bindir.mkdir()
    needed = [
        "bash",
        "env",
        "mkdir",
        "df",
        "awk",
        "dirname",
        "date",
        "sha256sum",
        "cut",
        "head",
        "tr",
        "uname",
    ]
    needed += ["enroot", "rsync", "mksquashfs", "unsquashfs"]
    for name in needed:
        if name == tool:
            continue
        which = subprocess.run(["which", name], capture_output=True, text=True)
        found = Path(which.stdout.strip()) if which.returncode == 0 else None
        if found is not None:
            (bindir / name).symlink_to(found)
    return str(bindir)


@pytest.mark.parametrize(
    ("tool", "line"),
    [
        (
            "enroot",
            "enroot not found (install it from NVIDIA's enroot releases, or set ENROOT=/path/to/enroot)",
        ),
        ("rsync", "rsync not found (install the rsync package)"),
        ("mksquashfs", "mksquashfs not found (install squashfs-tools)"),
    ],
)
def test_missing_tool(build_env, tmp_path, tool, line) -> None:
    result = run_build(build_env, PATH=_path_without(tool, tmp_path))
    assert result.returncode == 2
    assert _prereq_lines(result) == [f"build_aide_enroot.sh: {line}"]


def test_not_enough_space(build_env) -> None:
    result = run_build(build_env, MIN_EXPORT_GIB="999999", MIN_DATA_GIB="999998")
    assert result.returncode == 2
    lines = _prereq_lines(result)
    assert len(lines) == 2
    export_dir, data_dir = build_env["EXPORT_DIR"], build_env["ENROOT_DATA_PATH"]
    assert lines[0].startswith(f"build_aide_enroot.sh: EXPORT_DIR={export_dir} has ")
    assert lines[0].endswith(" GiB free, needs 999999 GiB (set MIN_EXPORT_GIB to override)")
    assert lines[1].startswith(f"build_aide_enroot.sh: ENROOT_DATA_PATH={data_dir} has ")
    assert lines[1].endswith(" GiB free, needs 999998 GiB (set MIN_DATA_GIB to override)")


def test_default_space_requirement_is_110_gib(build_env) -> None:
    result = run_build(build_env, MIN_EXPORT_GIB=None, MIN_DATA_GIB="0")
    free = subprocess.run(["df", "-Pk", build_env["EXPORT_DIR"]], capture_output=True, text=True, check=True)
    free_gib = int(free.stdout.splitlines()[1].split()[3]) // (1024 * 1024)
    if free_gib >= 110:
        assert result.returncode == 0, result.stderr
    else:
        assert result.returncode == 2
        assert "needs 110 GiB (set MIN_EXPORT_GIB to override)" in result.stderr


def test_unknown_cuda_variant_is_refused(build_env) -> None:
    result = run_build(build_env, TORCH_CUDA="cuda12")
    assert result.returncode == 2
    assert _prereq_lines(result) == [
        "build_aide_enroot.sh: TORCH_CUDA=cuda12 is not a PyTorch wheel variant (cu126, cu128, cu130, ...)"
    ]


def test_bad_out_dir_and_base(build_env, tmp_path) -> None:
    result = run_build(build_env, OUT_SQSH=str(tmp_path / "nodir" / "x.sqsh"), BASE_IMAGE="ubuntu")
    assert result.returncode == 2
    lines = _prereq_lines(result)
    assert any("BASE_IMAGE=ubuntu is neither an enroot URI" in line for line in lines)
    assert any(f"directory {tmp_path / 'nodir'} does not exist or is not writable" in line for line in lines)


def test_source_outside_git_is_copied_without_caches(build_env, tmp_path) -> None:
    src = tmp_path / "plain checkout"  # a space in the path, and no .git
    (src / "image").mkdir(parents=True)
    (src / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (src / "image" / "setup.sh").write_text("#!/bin/sh\n")
    (src / "__pycache__").mkdir()
    (src / "__pycache__" / "junk.pyc").write_bytes(b"x")
    (src / "old.sqsh").write_bytes(b"x")
    result = run_build(build_env, SOURCE_DIR=str(src))
    assert result.returncode == 0, result.stderr
    listing = subprocess.run(
        ["unsquashfs", "-l", build_env["OUT_SQSH"]], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert "squashfs-root/opt/mle-world/src/pyproject.toml" in listing
    assert not [p for p in listing if "__pycache__" in p or p.endswith("old.sqsh")]
    manifest = json.loads(Path(build_env["OUT_SQSH"] + ".manifest.json").read_text())
    assert manifest["harness"] == {"git_sha": None, "dirty": False}
