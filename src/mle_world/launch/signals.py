"""SIGTERM taken as Ctrl-C while a launcher runs (a timeout, systemd, the end of an salloc): the same
cleanup, and the trials it stops left resumable.

Installs and restores a SIGTERM handler in the main thread; reads and writes nothing.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (timeout, systemd, the end of an salloc) stops the launcher the way Ctrl-C does;
    a second SIGTERM during that cleanup is ignored so the cleanup finishes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise KeyboardInterrupt("SIGTERM")  # the reason the stopped trials' status records

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
