"""`run_paper.py ... | head`: a reader that leaves early ends the command quietly, as with any filter.

Runs `run_paper.py` in a real subprocess with its stdout on a pipe; writes only pytest's tmp paths.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    # 357 rendered commands, far more than a pipe's buffer: the reader leaves while the CLI still writes.
    args = ["--regime", "gated", "--enroot-image", "/img/a.sqsh", "--data-dir", "/data", "--dry-run"]
    proc = subprocess.Popen(
        [
            sys.executable,
            str(REPO / "run_paper.py"),
            *args,
            "--output-dir",
            str(tmp_path / "o"),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.read(10)  # what `head -c 10` takes before it leaves
    proc.stdout.close()
    err = proc.stderr.read().decode()
    code = proc.wait(timeout=120)
    assert first
    # Was: "run_paper.py: error: Broken pipe" (exit 2), or a BrokenPipeError traceback.
    assert err == "", err
    assert code == 141


def test_a_table_printed_to_a_closed_pipe_ends_as_a_filter() -> None:
    """What rich prints (status, estimate) hit rich's own broken-pipe handler, SystemExit(1): `status |
    head` said "some trial failed" (exit 1) of a sweep without failures."""
    proc = subprocess.Popen(
        [sys.executable, str(REPO / "run_paper.py"), "estimate", "--regime", "gated"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # gone before the CLI has imported what it prints with
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141 and err == "", err
