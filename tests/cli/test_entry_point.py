"""The process's entry point (`run_paper.py`, `python -m mle_world`): main's exit code, its output flushed
and atexit handlers run, although what the process built is frozen out of the GC before it exits.

Runs the CLI in real subprocesses; writes a small synthetic sweep and its audit under tmp_path.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from synthetic import make_sweep

REPO = Path(__file__).resolve().parents[2]
WITH_ATEXIT = (
    "import atexit, runpy, sys; atexit.register(lambda: print('atexit ran', file=sys.stderr)); "
    "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
)


def test_run_paper_exits_with_mains_code_and_flushes(tmp_path: Path) -> None:
    dirs = make_sweep(tmp_path, 20, events=True)
    audit = [str(REPO / "run_paper.py"), "audit", *map(str, dirs), "--out", str(tmp_path / "audit")]
    done = subprocess.run([sys.executable, "-c", WITH_ATEXIT, *audit], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().splitlines()[-1].startswith("wrote "), done.stdout
    assert done.stderr == "atexit ran\n"

    bad = [str(REPO / "run_paper.py"), "audit", str(tmp_path / "nowhere")]
    done = subprocess.run([sys.executable, "-c", WITH_ATEXIT, *bad], capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"run_paper.py: error: audit: {tmp_path / 'nowhere'}: no such directory",
        "atexit ran",
    ]


def test_audit_keeps_its_code_output_and_atexit(tmp_path: Path) -> None:
    # The exit code of --strict, every line of its output into a file (block-buffered, not a terminal)
    # and the atexit handlers survive the frozen GC's exit.
    dirs = make_sweep(tmp_path, 20, events=True)
    next((dirs[0] / "runs").glob("*/*_grading_report.json")).unlink()
    audit = [str(REPO / "run_paper.py"), "audit", *map(str, dirs), "--out", str(tmp_path / "audit")]
    log = tmp_path / "out.txt"
    with log.open("w") as handle:
        done = subprocess.run(
            [sys.executable, "-c", WITH_ATEXIT, *audit, "--strict"],
            stdout=handle,
            stderr=subprocess.PIPE,
            text=True,
        )
    assert done.returncode == 1, done.stderr
    assert done.stderr == "atexit ran\n"
    text = log.read_text()
    assert "Completeness" in text
    assert text.rstrip().splitlines()[-1].startswith("wrote "), text[-500:]

    # A thread still running when the audit is done: the exit waits for it.
    with_thread = WITH_ATEXIT.replace(
        "sys.argv = ",
        "import threading, time; threading.Thread(target=time.sleep, args=(2,)).start(); sys.argv = ",
    )
    done = subprocess.run([sys.executable, "-c", with_thread, *audit], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().splitlines()[-1].startswith("wrote ")
    assert done.stderr == "atexit ran\n"


def test_python_m_mle_world_is_the_same_cli(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mle_world", "audit", str(tmp_path / "nowhere")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert done.stderr.endswith(f"audit: {tmp_path / 'nowhere'}: no such directory\n")
