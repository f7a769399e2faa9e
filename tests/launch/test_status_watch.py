"""`status --watch`: a live view that follows status.json files until every trial finished."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from rich.console import Console

from mle_world.errors import UserError
from mle_world.launch.status import watch_status

REPO = Path(__file__).resolve().parents[2]
STARTED = datetime(2026, 1, 1, tzinfo=UTC).isoformat()


def write(out: Path, cfg: str, state: str, **fields: object) -> None:
    trial_id = f"gated/{cfg}/iris/seed1"
    path = out / "runs" / cfg / "iris_seed1" / "status.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"trial_id": trial_id, "state": state, "backend": "slurm", **fields}))


@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    (tmp_path / "launch.json").write_text("{}")
    write(tmp_path, "aide", "running", started_at=STARTED)
    write(tmp_path, "wm-point", "submitted")
    return tmp_path


def test_watch_follows_the_files_until_every_trial_finished(sweep: Path) -> None:
    frames: list[str] = []
    console = Console(file=io.StringIO(), width=200, record=True, force_terminal=True)

    def sleep(seconds: float) -> None:
        """Stands in for the wait between redraws: the sweep moves on while the view sleeps."""
        frames.append(console.export_text(clear=False))
        assert seconds == 2.5
        if len(frames) == 1:
            write(sweep, "wm-point", "running", started_at=STARTED)
            (sweep / "runs" / "aide" / "iris_seed1" / "status.json").write_text("{half")  # being replaced
        else:
            write(sweep, "aide", "succeeded", started_at=STARTED, ended_at=STARTED)
            write(sweep, "wm-point", "failed", failure_class="agent", cause="[red]boom[/red] in step 3")

    assert watch_status(sweep, console, interval_s=2.5, sleep=sleep) == 1
    assert len(frames) == 2
    assert "ETA: unknown (no trial finished yet)" in frames[0] and "running" in frames[0]
    last = console.export_text()
    assert "unreadable trial status" in last  # shown, not fatal, while watching
    assert "[red]boom[/red] in step 3" in last  # a cause is text, never rich markup
    assert "all trials finished" in last and "Ctrl-C to leave" in last


def test_watch_refuses_a_dir_that_is_no_sweep(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not an output dir"):
        watch_status(tmp_path, Console(file=io.StringIO()))


def test_cli_watch_returns_at_once_on_a_finished_sweep(sweep: Path) -> None:
    write(sweep, "aide", "succeeded", started_at=STARTED, ended_at=STARTED)
    write(sweep, "wm-point", "succeeded", started_at=STARTED, ended_at=STARTED)
    proc = subprocess.run(
        [sys.executable, str(REPO / "run_paper.py"), "status", "--watch", "--interval", "30", str(sweep)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "all trials finished" in proc.stdout and proc.stdout.endswith("\n")
    bad = subprocess.run(
        [sys.executable, str(REPO / "run_paper.py"), "status", "--watch", "--interval", "-1", str(sweep)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "--interval" in bad.stderr
