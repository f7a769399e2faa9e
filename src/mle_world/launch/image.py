"""Verification of the image passed as `--enroot-image`: Enroot's squashfs, or Apptainer's SIF.

Reads the image (superblock or SIF header, then a streamed sha256) and its optional
`IMAGE.manifest.json` written by scripts/image/build_aide_enroot.sh; writes nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from mle_world.errors import UserError

SQUASHFS_MAGIC = b"hsqs"
SUPERBLOCK_SIZE = 96
"""Size of the squashfs 4.0 superblock; a smaller file cannot be an image."""
COMPRESSION_IDS: dict[int, str] = {1: "gzip", 2: "lzma", 3: "lzo", 4: "xz", 5: "lz4", 6: "zstd"}
SIF_MAGIC = b"SIF_MAGIC"
SIF_MAGIC_AT = 32
"""A SIF file starts with a 32-byte launch script (`#!/usr/bin/env run-singularity`), then this magic."""
SIF_HEADER = SIF_MAGIC_AT + len(SIF_MAGIC)
HASH_CHUNK = 8 * 1024 * 1024
FLAG = "--enroot-image"


@dataclass(frozen=True)
class ImageInfo:
    """What `verify_image` found out about one squashfs image."""

    path: str
    """Absolute path of the image."""
    size_bytes: int
    compression: str
    """Compression named by the superblock (gzip, lzma, lzo, xz, lz4, zstd)."""
    version: tuple[int, int]
    """Squashfs major and minor version (4, 0)."""
    bytes_used: int
    """Bytes of the file the filesystem occupies (superblock field)."""
    sha256: str | None
    """Hex sha256 of the whole file; None when hashing was not asked for."""
    manifest_path: str | None = None
    """`IMAGE.manifest.json` beside the image, when present."""
    manifest_sha256_matches: bool | None = None
    """Whether the manifest's sha256 equals the file's; None without manifest or hash."""


def sha256_file(path: Path, chunk_size: int = HASH_CHUNK) -> str:
    """Return the hex sha256 of a file, streamed in `chunk_size` pieces (constant memory)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk_size):
            digest.update(block)
    return digest.hexdigest()


def _fail(path: Path, reason: str, flag: str) -> UserError:
    return UserError(f"{flag} {path}: {reason}")


def _head(image: Path, n: int, flag: str, build_hint: str) -> tuple[int, bytes]:
    """The file's size and first `n` bytes; one line naming `flag` when it is no readable file."""
    if not image.exists():
        raise _fail(image, f"does not exist ({build_hint})", flag)
    if not image.is_file():
        raise _fail(image, "is not a regular file", flag)
    if not os.access(image, os.R_OK):
        raise _fail(image, "is not readable (check its permissions)", flag)
    try:
        size = image.stat().st_size
        with open(image, "rb") as handle:
            return size, handle.read(n)
    except OSError as exc:
        raise _fail(image, f"cannot be read: {exc.strerror or exc}", flag) from exc


def verify_sif(path: str | os.PathLike[str], *, flag: str = FLAG) -> str:
    """The sha256 of `path` once its header is a SIF's (Apptainer and Singularity images); else one
    UserError line naming `flag` and the path. The image's contents are not checked."""
    image = Path(path).expanduser()
    _, head = _head(image, SIF_HEADER, flag, "build it from the .sqsh: docs/image-and-servers.md, Apptainer")
    if head[SIF_MAGIC_AT : SIF_MAGIC_AT + len(SIF_MAGIC)] != SIF_MAGIC:
        found = head[SIF_MAGIC_AT : SIF_MAGIC_AT + len(SIF_MAGIC)]
        raise _fail(image, f"is not a SIF image (bytes 32-40 {found!r}, expected {SIF_MAGIC!r})", flag)
    return sha256_file(image)


def verify_image(path: str | os.PathLike[str], *, compute_sha256: bool = True, flag: str = FLAG) -> ImageInfo:
    """Check that `path` is a readable squashfs 4.x image and return its facts.

    Raises `UserError` with one line naming `flag` and the path when the file is missing,
    unreadable, too small, not squashfs, of an unknown version/compression, or truncated.
    With `compute_sha256=False` (e.g. for a dry run) the file is not hashed.
    """
    image = Path(path).expanduser()
    size, head = _head(image, SUPERBLOCK_SIZE, flag, "build it with scripts/image/build_aide_enroot.sh")
    if head[:4] != SQUASHFS_MAGIC:
        raise _fail(image, f"is not a squashfs image (first bytes {head[:4]!r}, expected b'hsqs')", flag)
    if len(head) < SUPERBLOCK_SIZE:
        raise _fail(image, f"is truncated ({size} bytes, smaller than a squashfs superblock)", flag)
    (compression_id,) = struct.unpack_from("<H", head, 20)
    major, minor = struct.unpack_from("<HH", head, 28)
    (bytes_used,) = struct.unpack_from("<Q", head, 40)
    if major != 4:
        raise _fail(image, f"has squashfs version {major}.{minor}; enroot needs 4.x", flag)
    compression = COMPRESSION_IDS.get(compression_id)
    if compression is None:
        raise _fail(image, f"has an unknown squashfs compression id {compression_id}", flag)
    if bytes_used > size:
        raise _fail(image, f"is truncated ({size} bytes, superblock says {bytes_used})", flag)

    digest = sha256_file(image) if compute_sha256 else None
    manifest = image.with_name(image.name + ".manifest.json")
    manifest_path: str | None = None
    matches: bool | None = None
    if manifest.is_file():
        manifest_path = str(manifest.resolve())
        if digest is not None:
            matches = _manifest_sha256(manifest) == digest
    return ImageInfo(
        path=str(image.resolve()),
        size_bytes=size,
        compression=compression,
        version=(major, minor),
        bytes_used=bytes_used,
        sha256=digest,
        manifest_path=manifest_path,
        manifest_sha256_matches=matches,
    )


def _manifest_sha256(manifest: Path) -> str | None:
    """The `sha256` field of a build manifest, or None if it is unreadable."""
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    value = data.get("sha256") if isinstance(data, dict) else None
    return value if isinstance(value, str) else None
