"""Whether a launcher or an agent is still alive, told by the flock it holds for its whole run.

Reads (opens and probes) `<output_dir>/.launcher.lock` and `<trial>/.journal.lock`; writes nothing.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from mle_world import layout


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
    """A launcher holds the output dir's `.launcher.lock` (`launcher.launcher_lock`) while it runs."""
    return lock_held(output_dir / layout.LAUNCHER_LOCK)


def agent_alive(trial_dir: Path) -> bool:
    """A live agent holds the trial's `.journal.lock`: its run survived the launcher, on this host or
    another one."""
    return lock_held(trial_dir / layout.JOURNAL_LOCK)
