"""A non-editable install runs from any directory with the defaults it ships (configs, templates, tasks).

Reads the checkout's pyproject.toml, README.md and src/; writes an install and a dry run in tmp dirs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def test_installed_copy_dry_runs_from_another_directory(tmp_path: Path) -> None:
    source = tmp_path / "source"
    shutil.copytree(REPO / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(source)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    shutil.rmtree(source)  # nothing may be read from the source tree any more
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site)}
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "run_paper.py"),
            "--regime",
            "gated",
            "--tasks",
            "iris-species",
            "--runtime",
            "process",
            "--output-dir",
            "out",
            "--dry-run",
        ],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    record = json.loads((elsewhere / "out" / "launch.json").read_text())
    assert Path(record["config_path"]) == site / "mle_world" / "configs" / "paper.yaml"
    assert record["git_sha"] is None  # an installed copy is not a checkout
    assert record["trials"] and all("/iris-species/" in t["trial_id"] for t in record["trials"])
    probe = (
        "import mle_world; from mle_world.costs.prices import DEFAULT_PRICES, load_prices; "
        "load_prices(); print(mle_world.__file__); print(DEFAULT_PRICES)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=elsewhere, env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == [
        str(site / "mle_world" / "__init__.py"),
        str(site / "mle_world" / "configs" / "prices.yaml"),
    ]
