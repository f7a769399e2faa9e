"""Whether a launcher or an agent is still alive, told by the flock it holds for its whole run; and
the launcher's own lock. Probes `<output_dir>/.launcher.lock` and `<trial>/.journal.lock`; writes the
launcher lock's holder line (pid and host) while it holds it.
"""

from __future__ import annotations

import fcntl
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mle_world import layout
from mle_world.errors import UserError


def lock_held(path: Path) -> bool:
    """Whether another open file description holds a flock on `path` (also across NFS clients).
    A missing or unreadable file is no holder; the probe's own shared lock ends with its close."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
    return False


def launcher_alive(output_dir: Path) -> bool:
    """A launcher holds the output dir's `.launcher.lock` (`launcher_lock`) while it runs."""
    return lock_held(output_dir / layout.LAUNCHER_LOCK)


def agent_alive(trial_dir: Path) -> bool:
    """A live agent holds the trial's `.journal.lock`: its run survived the launcher, on this host or
    another one."""
    return lock_held(trial_dir / layout.JOURNAL_LOCK)


@contextmanager
def launcher_lock(output_dir: Path) -> Iterator[None]:
    """One launcher per output dir: while held, no other process supervises these trials, which is
    what makes 'running on the local backend' provably stale on a restart."""
    output_dir.mkdir(parents=True, exist_ok=True)
    path = output_dir / layout.LAUNCHER_LOCK
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip()
            raise UserError(f"--output-dir {output_dir}: another launcher is running ({holder})") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)
