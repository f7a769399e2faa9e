"""The prepared data a sweep ran on, as one fingerprint per task (launch.json's `data_manifests`).

Reads the names and sizes of every file under each task's public and private folders, and the content
of its private answers up to a bound; writes nothing.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

from mle_world.plan.sweep import PlannedTrial

CONTENT_LIMIT = 64 << 20
"""Private (answer) files up to this size are hashed by content; larger ones, and public files, by size."""


def _lines(root: Path, label: str, hash_content: bool) -> list[str]:
    out = []
    for directory, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            path = Path(directory, name)
            rel = f"{label}/{path.relative_to(root).as_posix()}"
            try:
                size = path.stat().st_size
            except OSError:
                out.append(f"{rel}\tunreadable")
                continue
            line = f"{rel}\t{size}"
            if hash_content and size <= CONTENT_LIMIT:
                try:
                    with open(path, "rb") as handle:
                        line += "\t" + hashlib.file_digest(handle, "sha256").hexdigest()
                except OSError:
                    line += "\tunreadable"
            out.append(line)
    return out


def data_manifest(public: Path, private: Path) -> str:
    """sha256 (16 hex digits) over the task's files: relative paths and sizes, and the answers' content.

    Sizes, not content, for the public data: hashing a large image competition at every launch would
    take minutes; a re-preparation with another split changes the answers, which are hashed."""
    lines = _lines(public, "public", False) + _lines(private, "private", True)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def data_manifests(trials: Sequence[PlannedTrial]) -> dict[str, str]:
    """task → its `data_manifest`, for every task of `trials` (each task read once)."""
    out: dict[str, str] = {}
    for trial in trials:
        task = trial.spec.task
        if task not in out:
            out[task] = data_manifest(trial.public_dir, trial.private_dir)
    return out
