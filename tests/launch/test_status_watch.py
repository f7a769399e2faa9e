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

from mle_world.cli.status_view import watch_status
from mle_world.errors import UserError

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


@pytest.mark.slurm
def test_a_slurm_job_that_ended_unrecorded_is_shown_and_ends_the_watch(
    slurm_cluster: None, sweep: Path
) -> None:
    """No launcher watches (it was Ctrl-C'd): a trial's job was cancelled, status.json still says
    running. `status` says so, from squeue/sacct, and `--watch` returns once the other trials are
    done instead of showing it running for ever."""
    from launchkit import wait_until

    from mle_world.cli.status_view import show_status
    from mle_world.launch.slurm.queries import query_states

    def submit() -> str:
        argv = ["sbatch", "--parsable", "-o", "/dev/null", "-t", "5", "--wrap", "sleep 300"]
        return (
            subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60)
            .stdout.split(";")[0]
            .strip()
        )

    dead, alive = submit(), submit()
    try:
        subprocess.run(["scancel", dead], check=True, timeout=60)
        wait_until(lambda: query_states([dead]).states.get(dead) == "CANCELLED", 60, f"job {dead} CANCELLED")
        write(sweep, "aide", "running", started_at=STARTED, slurm_job_id=dead)
        write(sweep, "wm-point", "submitted", slurm_job_id=alive)
        console = Console(file=io.StringIO(), width=300, record=True)
        show_status(sweep, console)
        text = console.export_text()
        assert f"Slurm says their jobs ended ({dead} CANCELLED)" in text
        assert alive not in text.split("Slurm says")[1]

        def sleep(seconds: float) -> None:
            assert not done, "still watching a sweep whose only active trial's job ended"
            done.append(seconds)
            write(sweep, "wm-point", "succeeded", started_at=STARTED, ended_at=STARTED, slurm_job_id=alive)

        done: list[float] = []
        assert watch_status(sweep, Console(file=io.StringIO()), interval_s=1, sleep=sleep) == 0
        assert done == [1]
    finally:
        subprocess.run(["scancel", alive], timeout=60)
