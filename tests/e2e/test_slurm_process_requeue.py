"""The real agent under `--runtime process` (bubblewrap) on the local Slurm: `scontrol requeue` during a
step reaches the agent, which checkpoints the time it used before it exits.

Writes a data dir, a cluster config and an output dir under pytest's tmp paths; submits to the local Slurm.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest
import scripted
import yaml
from e2ekit import REPO
from fakeserver import FakeOpenAIServer
from launchkit import wait_until

from mle_world.agent.journal import Checkpoint, load_checkpoint

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def read_json(path: Path) -> dict:  # type: ignore[type-arg]
    try:
        return json.loads(path.read_text())  # type: ignore[no-any-return]
    except (OSError, ValueError):
        return {}


def checkpointed(journal: Path) -> Checkpoint:
    """The agent's journal as of its last checkpoint (journal.json plus journal.jsonl)."""
    try:
        ckpt = load_checkpoint(journal)
    except (OSError, ValueError):
        ckpt = None
    return ckpt or Checkpoint(trial_id="", science_hash="")


def test_requeue_during_a_step_leaves_agent_time_at_least_launcher_time(
    tmp_path: Path, data_dir: Path, fast_config: Path
) -> None:
    if shutil.which("sinfo") is None:
        pytest.skip("sinfo not found: start it with `bash scripts/slurm/local_cluster.sh up`")
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(
        yaml.safe_dump(
            {
                "slurm": {
                    "partition": "gpu",
                    "gpus_per_trial": 0,  # fake GPUs would fail the agent's GPU check
                    "cpus_per_trial": 1,
                    "mem_gb": 1,
                    "array_parallelism": 1,
                    "grading_margin_min": 3,
                },
                "launch": {"wall_grace_s": 30},
            }
        )
    )
    out = tmp_path / "out"
    job = None
    with (
        FakeOpenAIServer("coder-model", default=scripted.coder(sleep_s=25)) as coder,
        FakeOpenAIServer("feedback-model", default=scripted.review) as feedback,
        FakeOpenAIServer("world-model", default=scripted.world()) as world,
    ):
        argv = [
            sys.executable, str(REPO / "run_paper.py"), "--config", str(fast_config), "--regime", "ungated",
            "--cluster-config", str(cluster), "--runtime", "process", "--backend", "slurm",
            "--data-dir", str(data_dir), "--output-dir", str(out), "-c", "iris-species", "-m", "aide",
            "--no-progress", "--coder-url", coder.url, "--feedback-url", feedback.url, "--world-url", world.url,
        ]  # fmt: skip
        launcher = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_until(
                lambda: list(out.glob("runs/*/*/status.json")) or launcher.poll() is not None,
                120,
                "submission",
            )
            assert launcher.poll() is None, launcher.communicate()[1][-3000:]
            trial = next(out.glob("runs/*/*/status.json")).parent
            status = trial / "status.json"
            journal = trial / "journal.json"
            wait_until(lambda: checkpointed(journal).nodes, 180, "first step checkpointed")
            written = max(p.stat().st_mtime for p in trial.glob("journal.json*"))
            first_ckpt = checkpointed(journal).time_used_s
            started = datetime.fromisoformat(read_json(status)["started_at"])
            # What the agent's clock missed of the attempt so far: the launcher's start to the agent's
            # (interpreter, imports, sandbox), which a loaded machine stretches (6.6 s seen at load 8).
            start_up = written - started.timestamp() - first_ckpt
            # Well inside the next step's 25 s script: 15 s after the checkpoint was written, timed from its
            # write and not from the launcher's start, which a slow start-up (14 s seen in CI) would offset.
            wait_until(lambda: time.time() > written + 15, 60, "mid step")
            assert len(checkpointed(journal).nodes) == 1
            job = read_json(status)["slurm_job_id"]
            subprocess.run(["scontrol", "requeue", job], check=True)
            wait_until(lambda: read_json(status).get("preemptions") == 1, 90, "preemption recorded")
        finally:
            if job:
                subprocess.run(["scancel", job], check=False)
            launcher.send_signal(signal.SIGTERM)
            _, err = launcher.communicate(timeout=60)
    launcher_s = read_json(status)["wall_used_s"]
    agent_s = checkpointed(journal).time_used_s
    assert launcher.returncode == 130, err[-2000:]
    # The agent checkpointed on the signal, mid step (not only at its last step's end), and counted
    # the whole attempt but its own start-up, measured above (and the moments between its last
    # checkpoint and the launcher's record of the attempt's end).
    assert "preempted by signal 15: checkpointed" in (trial / "logs" / "agent.log").read_text()
    assert agent_s > first_ckpt + 8, (agent_s, first_ckpt)
    assert launcher_s - start_up - 3 <= agent_s <= launcher_s + 1, (agent_s, launcher_s, start_up)
