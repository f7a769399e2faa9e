"""The CLI run in pytest's own process: `mle_world.cli.main(argv)` with its output captured (capfd), and
a check that the command left the process as it found it (cwd, environment, signals, logging, threads).

Reads and writes what the command does (tests pass tmp paths); changes the cwd and environment only for
the call, and restores them.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class CliResult:
    """What a subprocess.CompletedProcess says of a run, for assertions written for either."""

    returncode: int
    stdout: str
    stderr: str


def process_state() -> dict[str, object]:
    """What one command could change for the next test in the same process."""
    import rich

    signals = {}
    for number in signal.valid_signals():
        try:
            signals[number] = signal.getsignal(number)
        except (OSError, ValueError):
            continue
    loggers = [
        logging.getLogger(),
        *(v for v in logging.root.manager.loggerDict.values() if isinstance(v, logging.Logger)),
    ]
    umask = os.umask(0o022)
    os.umask(umask)
    return {
        "cwd": os.getcwd(),
        "environ": dict(os.environ),
        "umask": umask,
        "signals": signals,
        "logging": {lg.name: (tuple(lg.handlers), lg.level, lg.propagate, lg.disabled) for lg in loggers},
        "rich's global console": id(rich._console),  # noqa: SLF001 - rich.print's console, made on first use
        "streams": (sys.stdout, sys.stderr, sys.stdin),
        "sys.path": list(sys.path),
        "threads": {t.ident for t in threading.enumerate()},
    }


def _changes(before: dict[str, object], after: dict[str, object]) -> dict[str, object]:
    changed: dict[str, object] = {}
    for key, was in before.items():
        now = after[key]
        if key == "threads":
            assert isinstance(now, set) and isinstance(was, set)
            if now - was:  # a thread of an earlier test may end meanwhile; a new one must not stay
                changed[key] = now - was
        elif key == "logging":
            assert isinstance(now, dict) and isinstance(was, dict)
            # A module imported for the first time may create its logger; an existing one must not change.
            moved = {name: (old, now.get(name)) for name, old in was.items() if now.get(name) != old}
            if moved:
                changed[key] = moved
        elif now != was:
            changed[key] = (was, now)
    return changed


@dataclass
class Cli:
    """`cli.run(*argv, cwd=..., env=...)`: main(argv) in the working directory `cwd`, with `env`'s
    variables set (None: unset) for the call; exit code, stdout and stderr as a CliResult."""

    capfd: pytest.CaptureFixture[str]

    def run(self, *argv: str, cwd: Path, env: Mapping[str, str | None] | None = None) -> CliResult:
        from mle_world.cli import main

        self.capfd.readouterr()  # what the test printed before is not the command's
        old_cwd, old_env = os.getcwd(), dict(os.environ)
        os.chdir(cwd)
        for name, value in (env or {}).items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        try:
            before = process_state()
            try:
                code = main(list(argv))
            except SystemExit as exc:  # --help, --version: argparse's own exit
                code = exc.code if isinstance(exc.code, int) else 1
            out, err = self.capfd.readouterr()
            after = process_state()
        finally:
            os.chdir(old_cwd)
            os.environ.clear()
            os.environ.update(old_env)
        changed = _changes(before, after)
        assert not changed, f"{list(argv)} left the process changed: {changed}"
        return CliResult(code, out, err)
