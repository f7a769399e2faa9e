"""Helpers for end-to-end tests: the repository root and the CLI as a subprocess.

Reads nothing; runs run_paper.py.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def cli(*args: str, timeout: float = 600, **kwargs) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    return subprocess.run(
        [sys.executable, str(REPO / "run_paper.py"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        **kwargs,
    )


def as_from_a_terminal() -> None:
    """`preexec_fn` of a launcher a test stops with Ctrl-C's SIGINT: a background job of a
    non-interactive shell (how a CI runner may start the suite) inherits SIGINT ignored, and an ignored
    signal stays ignored across exec, so the launcher never saw the test's Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
