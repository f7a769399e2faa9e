"""Fixtures of the launch tests: output/data dirs and the local Slurm availability rule.

Reads the environment (CI) and PATH; writes nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path / "out dir", tmp_path / "data"


def _slurm_usable() -> str | None:
    """None when the local cluster answers, else why not."""
    if shutil.which("sinfo") is None:
        return "sinfo not found: start it with `bash scripts/slurm/local_cluster.sh up`"
    proc = subprocess.run(
        ["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=30, check=False
    )
    state = proc.stdout.strip()
    # `completing`: the node is finishing a job an earlier test ran (or cancelled); it takes new ones.
    if proc.returncode != 0 or not state.startswith(("idle", "mix", "alloc", "completing")):
        return (
            f"local Slurm not usable (sinfo rc={proc.returncode}, state={state!r}): "
            "run `bash scripts/slurm/local_cluster.sh up`"
        )
    return None


@pytest.fixture(scope="session")
def slurm_cluster() -> None:
    """Slurm tests skip locally without sinfo; under CI (CI=true) a missing cluster is a failure."""
    why = _slurm_usable()
    if why is None:
        return
    if os.environ.get("CI", "").lower() in ("1", "true", "yes") or shutil.which("sinfo") is not None:
        pytest.fail(why)
    pytest.skip(why)
