"""How much disk a trial's workspace takes, and the watch that stops a run growing it past `sandbox.disk_mb`.

Reads the workspace tree (lstat of every entry, links never followed) and its filesystem's block counts
(statvfs); writes nothing. RLIMIT_FSIZE bounds any one file a script writes (the kernel applies it to
uid 0 too); this watch bounds the sum, which many files under that size could otherwise grow without end.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

RESCAN_S = 5.0
"""Walk the workspace at least this often while a run lasts, whatever the filesystem says (space freed
elsewhere on it could hide the run's growth)."""
RESCAN_COST_FACTOR = 10
"""...but never spend more than a tenth of the time walking: a tree of a million files takes seconds."""


def disk_usage(root: Path | str) -> int:
    """Bytes allocated under `root` (sparse files count what they use; each inode once), links not followed."""
    total = 0
    seen: set[tuple[int, int]] = set()
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            try:
                info = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue  # removed meanwhile
            if info.st_nlink > 1:
                inode = (info.st_dev, info.st_ino)
                if inode in seen:
                    continue
                seen.add(inode)
            total += info.st_blocks * 512
    return total


def filesystem_used(path: Path | str) -> int:
    """Bytes in use on the filesystem holding `path` (-1 when it cannot be asked)."""
    try:
        info = os.statvfs(path)
    except OSError:
        return -1
    return (info.f_blocks - info.f_bfree) * info.f_frsize


@dataclass
class DiskCeiling:
    """Watches one run's workspace: `exceeded()` is polled while it runs.

    The filesystem's used space is one statvfs call; the workspace is walked only when the filesystem
    grew by more than the room left since the last walk (everything the script writes lands there:
    the workspace, its `tmp/` and `/dev/shm`), and every RESCAN_S regardless. A burst between two checks
    can overshoot the limit by what it writes in one interval; the largest size seen is kept.
    """

    root: Path
    limit: int
    """Bytes."""
    peak: int = 0
    _scanned_fs: int = field(default=-1, repr=False)
    _scanned_usage: int = field(default=0, repr=False)
    _next_scan: float = field(default=0.0, repr=False)

    def __post_init__(self) -> None:
        self._scan()

    def _scan(self) -> int:
        started = time.monotonic()
        self._scanned_fs = filesystem_used(self.root)
        self._scanned_usage = disk_usage(self.root)
        self.peak = max(self.peak, self._scanned_usage)
        took = time.monotonic() - started
        self._next_scan = started + max(RESCAN_S, RESCAN_COST_FACTOR * took)
        return self._scanned_usage

    def exceeded(self) -> bool:
        used = filesystem_used(self.root)
        room = self.limit - self._scanned_usage
        quiet = used >= 0 and self._scanned_fs >= 0 and used - self._scanned_fs <= room
        if quiet and time.monotonic() < self._next_scan:
            return False
        return self._scan() > self.limit

    def holds(self, usage: int) -> bool:
        """Whether `usage` (the workspace's bytes, measured by the caller) is over the limit; kept as seen."""
        self.peak = max(self.peak, usage)
        return usage > self.limit

    @property
    def error(self) -> tuple[str, str]:
        """The exception type and message a run killed by this watch ends with."""
        return "DiskLimitError", (
            f"the script's workspace grew to {self.peak >> 20} MiB, over the sandbox's disk limit of "
            f"{self.limit >> 20} MiB; it was killed and the files it could write were removed"
        )
