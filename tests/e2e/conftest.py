"""Fixtures for end-to-end sweeps: prepared local competitions and a fast demo config.

Writes the data dir and config under pytest's tmp paths.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from e2ekit import REPO, cli


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("data")
    proc = cli("prepare", "--config", str(REPO / "configs" / "demo.yaml"), "--data-dir", str(path))
    assert proc.returncode == 0, proc.stderr
    return path


@pytest.fixture
def fast_config(tmp_path: Path) -> Path:
    """configs/demo.yaml with fewer steps: a draft, then improvements that the world model sees."""
    config = yaml.safe_load((REPO / "configs" / "demo.yaml").read_text())
    config["budget"].update(
        {"max_steps": 3, "time_limit_s": 120, "debug_timeout_s": 20, "exec_timeout_s": 30}
    )
    config["search"].update({"num_drafts": 1, "debug_prob": 1.0})
    # The end-to-end tests' 12 trials: the demo's wm-all-stages (drafts gated too) runs in
    # tests/agent/test_configurations.py against scripted servers, in both regimes.
    config["configurations"].pop("wm-all-stages", None)
    path = tmp_path / "demo-fast.yaml"
    path.write_text(yaml.safe_dump(config))
    return path
