"""The in-process CLI runner (tests/support/clikit.py) itself: it fails a command that leaves the
process changed for the next test, and passes main's exit code and output through.

Runs a stand-in for `mle_world.cli.main` in process; writes nothing.
"""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path

import pytest
from clikit import Cli

import mle_world.cli


def test_output_and_exit_code_pass_through(cli: Cli, tmp_path: Path) -> None:
    done = cli.run("audit", str(tmp_path / "nowhere"), cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"run_paper.py: error: audit: {tmp_path / 'nowhere'}: no such directory\n"


def _leaves_env(argv: list[str]) -> int:
    os.environ["MLE_WORLD_LEFT_BEHIND"] = "1"
    return 0


def _leaves_a_signal_handler(argv: list[str]) -> int:
    signal.signal(signal.SIGUSR1, lambda *_: None)
    return 0


def _leaves_a_log_handler(argv: list[str]) -> int:
    logging.getLogger().addHandler(logging.NullHandler())
    return 0


def _leaves_the_cwd(argv: list[str]) -> int:
    os.chdir("/")
    return 0


@pytest.mark.parametrize(
    ("main", "what"),
    [
        (_leaves_env, "environ"),
        (_leaves_a_signal_handler, "signals"),
        (_leaves_a_log_handler, "logging"),
        (_leaves_the_cwd, "cwd"),
    ],
)
def test_a_command_that_leaves_state_fails_the_test(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, main: object, what: str
) -> None:
    previous = (signal.getsignal(signal.SIGUSR1), list(logging.getLogger().handlers))
    monkeypatch.setattr(mle_world.cli, "main", main)
    try:
        with pytest.raises(AssertionError, match=what):
            cli.run("x", cwd=tmp_path)
    finally:
        signal.signal(signal.SIGUSR1, previous[0])
        logging.getLogger().handlers[:] = previous[1]
    assert "MLE_WORLD_LEFT_BEHIND" not in os.environ and Path.cwd() != Path("/")
