"""The price table charges each self-hosted role the GPUs its server holds: the shipped files agree, and a
launch whose config serves a role on other GPUs than the table charges says so before anything runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "src" / "mle_world" / "configs"


def test_shipped_price_table_charges_the_gpus_paper_yaml_serves() -> None:
    prices = yaml.safe_load((CONFIGS / "prices.yaml").read_text())["self_hosted"]
    serve = yaml.safe_load((CONFIGS / "paper.yaml").read_text())["serve"]
    assert {role: s["gpus"] for role, s in serve.items()} == {role: p["gpus"] for role, p in prices.items()}


def dry_run(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, str(REPO / "run_paper.py"), "--regime", "gated", "--output-dir"]
    cmd += [str(tmp_path / "out"), "--enroot-image", "aide.sqsh", "--dry-run", "--summary", *extra]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=120)


def test_dry_run_with_the_shipped_tables_warns_of_nothing(tmp_path: Path) -> None:
    done = dry_run(tmp_path)
    assert done.returncode == 0, done.stderr
    assert "self_hosted" not in done.stderr


def test_a_price_table_charging_fewer_gpus_than_served_is_named_with_the_ratio(tmp_path: Path) -> None:
    text = (CONFIGS / "prices.yaml").read_text().replace("coder: {gpus: 2,", "coder: {gpus: 1,")
    prices = tmp_path / "prices.yaml"
    prices.write_text(text)
    done = dry_run(tmp_path, "--prices", str(prices))
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if "self_hosted" in line]
    assert len(warned) == 1, done.stderr
    assert "self_hosted.coder.gpus is 1" in warned[0] and "serve.coder.gpus" in warned[0]
    assert "off by 2x" in warned[0] and str(prices) in warned[0]
