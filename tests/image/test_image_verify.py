"""verify_image on real squashfs files built with mksquashfs, and on files that are not images.

Reads the images it builds; writes them under pytest's tmp_path.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from mle_world.errors import UserError
from mle_world.launch.image import sha256_file, verify_image


def _mksquashfs(tmp_path: Path, comp: str = "gzip") -> Path:
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "marker").write_text("hello\n")
    image = tmp_path / "tiny.sqsh"
    subprocess.run(
        ["mksquashfs", str(root), str(image), "-all-root", "-noappend", "-quiet", "-comp", comp],
        check=True,
        capture_output=True,
    )
    return image


@pytest.mark.parametrize("comp", ["gzip", "lzo", "zstd"])
def test_real_squashfs_is_accepted(tmp_path, squashfs_tools, comp) -> None:
    image = _mksquashfs(tmp_path, comp)
    info = verify_image(image)
    assert info.compression == comp
    assert info.version == (4, 0)
    assert info.size_bytes == image.stat().st_size
    assert 96 <= info.bytes_used <= info.size_bytes
    assert info.sha256 == hashlib.sha256(image.read_bytes()).hexdigest()
    assert info.path == str(image.resolve())
    assert info.manifest_path is None and info.manifest_sha256_matches is None


def test_manifest_sha256_is_compared(tmp_path, squashfs_tools) -> None:
    image = _mksquashfs(tmp_path)
    manifest = tmp_path / "tiny.sqsh.manifest.json"
    manifest.write_text(json.dumps({"sha256": sha256_file(image)}))
    assert verify_image(image).manifest_sha256_matches is True
    manifest.write_text(json.dumps({"sha256": "0" * 64}))
    assert verify_image(image).manifest_sha256_matches is False
    assert verify_image(image, compute_sha256=False).sha256 is None


def test_sha256_streams_in_chunks(tmp_path) -> None:
    data = os.urandom(3 * 1024 + 17)
    path = tmp_path / "blob"
    path.write_bytes(data)
    assert sha256_file(path, chunk_size=1024) == hashlib.sha256(data).hexdigest()


def test_non_squashfs_is_refused(tmp_path) -> None:
    bogus = tmp_path / "image.sqsh"
    bogus.write_bytes(b"PK\x03\x04" + b"\0" * 200)
    with pytest.raises(UserError) as info:
        verify_image(bogus)
    assert str(info.value) == (
        f"--enroot-image {bogus}: is not a squashfs image (first bytes b'PK\\x03\\x04', expected b'hsqs')"
    )
    assert info.value.exit_code == 2


def test_missing_and_unreadable_and_truncated(tmp_path, squashfs_tools) -> None:
    missing = tmp_path / "nope.sqsh"
    with pytest.raises(UserError, match=r"^--enroot-image .*nope\.sqsh: does not exist"):
        verify_image(missing)
    with pytest.raises(UserError, match="is not a regular file"):
        verify_image(tmp_path)

    image = _mksquashfs(tmp_path)
    cut = tmp_path / "cut.sqsh"
    cut.write_bytes(image.read_bytes()[:200])
    with pytest.raises(UserError, match="is truncated"):
        verify_image(cut)
    short = tmp_path / "short.sqsh"
    short.write_bytes(b"hsqs" + b"\0" * 10)
    with pytest.raises(UserError, match="smaller than a squashfs superblock"):
        verify_image(short)

    if os.geteuid() != 0:  # root reads anything; the permission check only bites for users
        locked = tmp_path / "locked.sqsh"
        locked.write_bytes(image.read_bytes())
        locked.chmod(0)
        with pytest.raises(UserError, match="is not readable"):
            verify_image(locked)


def test_flag_name_is_configurable(tmp_path) -> None:
    with pytest.raises(UserError, match=r"^--image "):
        verify_image(tmp_path / "x.sqsh", flag="--image")
