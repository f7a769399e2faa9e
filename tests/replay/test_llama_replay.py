"""Replay against a real llama.cpp server (gemma3 270M): a scripted ungated sweep's candidates are asked of
the real model and the request gets a stored reply (valid or not: the 270M model's JSON is its own).

Starts the llama.cpp server with scripts/serve/serve_llama_local.sh and `run_paper.py replay` as a process;
writes an output dir under tmp_path.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from replaykit import scripted_sweep

from mle_world.plan.config import packaged_config
from mle_world.replay.replies import ReplayReply

pytestmark = [pytest.mark.llama, pytest.mark.slow, pytest.mark.timeout(900)]
REPO = Path(__file__).resolve().parents[2]


def test_replay_completes_against_the_real_model(tmp_path: Path, llama_url: str) -> None:
    out = tmp_path / "ungated"
    scripted_sweep(out, tmp_path / "data", trials=1, steps=1)
    command = [sys.executable, str(REPO / "run_paper.py"), "replay", str(out), "--world-url", llama_url]
    # The demo's endpoint settings: a 4096-token context and short replies, one request at a time.
    command += ["--config", str(packaged_config("demo.yaml")), "--out", str(tmp_path / "replay")]
    run = subprocess.run(command, capture_output=True, text=True, timeout=800)
    assert run.returncode == 0, run.stderr
    stored = [
        ReplayReply.model_validate_json(line)
        for line in (tmp_path / "replay" / "replies.jsonl").read_text().splitlines()
    ]
    assert len(stored) == 1 and stored[0].prediction is not None
    assert "1 of 1 requests answered" in (tmp_path / "replay" / "replay-report.md").read_text()
