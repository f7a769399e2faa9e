"""How much disk a trial's workspace takes, and the watch that stops a run growing it past its limits.

Reads the workspace tree (lstat of every entry, links never followed), its filesystem's block and
inode counts (statvfs) and the run's open files without a name (/proc/<pid>/fd); writes nothing.
RLIMIT_FSIZE bounds any one file a script writes (the kernel applies it to uid 0 too); this watch
bounds the sum (`sandbox.disk_mb`), which many files under that size could otherwise grow without
end, and the number of entries (`sandbox.max_files`): empty files take no blocks, but a filesystem
whose inodes run out is as full for everyone on it.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from mle_world.agent.sandbox.process_tree import tree_threads
from mle_world.agent.sandbox.workspace import DIR_FLAGS

RESCAN_S = 5.0
"""Walk the workspace at least this often while a run lasts, whatever the filesystem says (space freed
elsewhere on it could hide the run's growth)."""
RESCAN_COST_FACTOR = 10
"""...but never spend more than a tenth of the time walking: a tree of a million files takes seconds."""


class DiskUsage(NamedTuple):
    """What a tree takes: allocated bytes and inodes (each counted once). `complete` is False when a
    directory could not be listed (deeper than descriptors allow, unreadable): what it holds is unseen."""

    bytes: int
    inodes: int
    complete: bool = True


def measure(root: Path | str) -> DiskUsage:
    """Bytes allocated under `root` (sparse files count what they use) and its inodes; each inode once
    (hard links), links never followed.

    Walked through directory descriptors (names relative to them) without recursion: a script can
    nest directories past PATH_MAX, where paths fail, and past Python's recursion limit. One descriptor
    per level of depth is held; a directory that cannot be opened or listed makes the usage incomplete.
    """
    total = inodes = 0
    complete = True
    seen: set[tuple[int, int]] = set()
    try:
        top = os.open(root, DIR_FLAGS & ~os.O_NOFOLLOW)  # the agent's own path (as os.walk took it)
    except FileNotFoundError:
        return DiskUsage(0, 0)
    except OSError:  # e.g. made unreadable by a script running as the agent's uid
        return DiskUsage(0, 0, complete=False)
    frames: list[tuple[int, list[str]]] = []
    fd: int | None = top
    try:
        while True:
            if fd is not None:
                subdirs: list[str] = []
                try:
                    with os.scandir(fd) as scan:
                        for entry in scan:
                            try:
                                info = entry.stat(follow_symlinks=False)
                            except FileNotFoundError:
                                continue  # removed meanwhile
                            if info.st_nlink > 1 and not stat.S_ISDIR(info.st_mode):
                                inode = (info.st_dev, info.st_ino)
                                if inode in seen:
                                    continue
                                seen.add(inode)
                            total += info.st_blocks * 512
                            inodes += 1
                            if stat.S_ISDIR(info.st_mode):
                                subdirs.append(entry.name)
                except OSError:
                    complete = False
                frames.append((fd, subdirs))
                fd = None
            if not frames:
                break
            parent, pending = frames[-1]
            if not pending:
                os.close(parent)
                frames.pop()
                continue
            try:
                fd = os.open(pending.pop(), DIR_FLAGS, dir_fd=parent)
            except (FileNotFoundError, NotADirectoryError):
                continue  # removed or replaced meanwhile
            except OSError:
                complete = False
    finally:
        for parent, _ in frames:
            os.close(parent)
    return DiskUsage(total, inodes, complete)


def held_deleted(root_pid: int, device: int, proc: str = "/proc") -> DiskUsage:
    """Files on `device` that `root_pid` or its descendants hold open after every name of them was
    removed: no walk finds them, yet their blocks stay taken until the last descriptor or mapping
    closes. Each inode once; processes, descriptors or mappings that vanish, or that may not be looked
    at (`map_files` needs CAP_SYS_ADMIN of the host: a root agent), are skipped."""
    total = inodes = 0
    seen: set[int] = set()
    for pid in (root_pid, *tree_threads(root_pid, proc)):
        fds = []
        for kind in ("fd", "map_files"):
            try:
                with os.scandir(f"{proc}/{pid}/{kind}") as entries:
                    fds += [entry.path for entry in entries]
            except OSError:
                continue
        for fd in fds:
            try:
                info = os.stat(fd)  # the open file itself (the link is /proc's, not the script's)
            except OSError:
                continue
            if (
                info.st_nlink
                or info.st_dev != device
                or not stat.S_ISREG(info.st_mode)
                or info.st_ino in seen
            ):
                continue
            seen.add(info.st_ino)
            total += info.st_blocks * 512
            inodes += 1
    return DiskUsage(total, inodes)


def filesystem_used(path: Path | str) -> DiskUsage | None:
    """Bytes and inodes in use on the filesystem holding `path` (None when it cannot be asked)."""
    try:
        info = os.statvfs(path)
    except OSError:
        return None
    return DiskUsage((info.f_blocks - info.f_bfree) * info.f_frsize, info.f_files - info.f_ffree)


def filesystem_free(path: Path | str) -> DiskUsage | None:
    """Bytes and inodes an unprivileged writer may still take on the filesystem holding `path`; a
    filesystem without a fixed inode count (btrfs, tmpfs with nr_inodes=0: statvfs says 0 of 0) has
    inodes without end."""
    try:
        info = os.statvfs(path)
    except OSError:
        return None
    return DiskUsage(info.f_bavail * info.f_frsize, info.f_favail if info.f_files else sys.maxsize)


class DiskShortage(Exception):
    """The file system holding the workspace has less than its reserve free before a run starts: the
    trial fails as infrastructure (other writers filled it), no script is blamed."""


def check_reserve(root: Path, reserve: DiskUsage | None) -> None:
    """Raise DiskShortage when the file system holding `root` has less than `reserve` free."""
    free = filesystem_free(root)
    if reserve is None or free is None or (free.bytes >= reserve.bytes and free.inodes >= reserve.inodes):
        return
    raise DiskShortage(
        f"disk: the file system holding {root} has {free.bytes >> 20} MiB and {free.inodes} files free, "
        f"under the sandbox's reserve of {reserve.bytes >> 20} MiB and {reserve.inodes} files "
        "(sandbox.disk_reserve_mb, files_reserve): free space there, then re-run with --retry-failed"
    )


@dataclass
class DiskCeiling:
    """Watches one run's workspace: `exceeded()` is polled while it runs.

    The filesystem's used blocks and inodes are one statvfs call; the workspace is walked only when
    either grew by more than the room left since the last walk (everything the script writes lands
    on it: the workspace, its `tmp/` and `/dev/shm`), and every RESCAN_S regardless. A burst between
    two checks can overshoot a limit by what it writes in one interval; the largest usage seen is kept.

    The file system is shared (other trials, this trial's own records): while it has less than
    `reserve` free, a run whose workspace grew by more than half the reserve since its start is stopped
    too, whatever its limit (a run that wrote less did not take the space; it goes on, and the trial
    fails as infrastructure at its next run's `check_reserve`).
    """

    root: Path
    limit: int
    """Bytes."""
    max_inodes: int | None = None
    pid: int | None = None
    """The run's first process: files its tree holds open without a name count too."""
    reserve: DiskUsage | None = None
    """Bytes and inodes the file system keeps free while the run lasts; None: not watched."""
    peak: DiskUsage = DiskUsage(0, 0)
    short: bool = False
    """Stopped because the file system fell below its reserve while the workspace grew."""
    _scanned_fs: DiskUsage | None = field(default=None, repr=False)
    _scanned: DiskUsage = field(default=DiskUsage(0, 0), repr=False)
    _start: DiskUsage = field(default=DiskUsage(0, 0), repr=False)
    _next_scan: float = field(default=0.0, repr=False)
    _next_reserve_scan: float = field(default=0.0, repr=False)

    def __post_init__(self) -> None:
        self._start = self._scan()

    def _scan(self) -> DiskUsage:
        started = time.monotonic()
        self._scanned_fs = filesystem_used(self.root)
        self._scanned = measure(self.root)
        if self.pid is not None:
            with contextlib.suppress(OSError):
                hidden = held_deleted(self.pid, os.stat(self.root).st_dev)
                self._scanned = self._scanned._replace(
                    bytes=self._scanned.bytes + hidden.bytes, inodes=self._scanned.inodes + hidden.inodes
                )
        self.holds(self._scanned)
        took = time.monotonic() - started
        self._next_scan = started + max(RESCAN_S, RESCAN_COST_FACTOR * took)
        self._next_reserve_scan = started + RESCAN_COST_FACTOR * took
        return self._scanned

    def _short_of_reserve(self) -> bool:
        """Whether the file system has less than the reserve free and this run's workspace grew."""
        free = filesystem_free(self.root)
        if self.reserve is None or free is None:
            return False
        if free.bytes >= self.reserve.bytes and free.inodes >= self.reserve.inodes:
            return False
        if time.monotonic() < self._next_reserve_scan:  # walks cost at most a tenth of the time
            return False
        usage = self._scan()
        grown = DiskUsage(usage.bytes - self._start.bytes, usage.inodes - self._start.inodes)
        self.short = grown.bytes > self.reserve.bytes // 2 or grown.inodes > self.reserve.inodes // 2
        return self.short

    def exceeded(self) -> bool:
        if self._short_of_reserve():
            return True
        now, last = filesystem_used(self.root), self._scanned_fs
        quiet = (
            now is not None
            and last is not None
            and now.bytes - last.bytes <= self.limit - self._scanned.bytes
            and (
                self.max_inodes is None or now.inodes - last.inodes <= self.max_inodes - self._scanned.inodes
            )
        )
        if quiet and time.monotonic() < self._next_scan:
            return False
        return self.holds(self._scan())

    def holds(self, usage: DiskUsage) -> bool:
        """Whether `usage` (the workspace's, measured by the caller) is over a limit; kept as seen."""
        self.peak = DiskUsage(
            max(self.peak.bytes, usage.bytes),
            max(self.peak.inodes, usage.inodes),
            self.peak.complete and usage.complete,
        )
        return (
            usage.bytes > self.limit
            or (self.max_inodes is not None and usage.inodes > self.max_inodes)
            or not usage.complete  # what cannot be counted is not known to be under the limit
        )

    @property
    def error(self) -> tuple[str, str]:
        """The exception type and message a run killed by this watch ends with."""
        if self.short and self.reserve is not None:
            what = (
                f"grew by more than half the reserve of its file system, which had less than "
                f"{self.reserve.bytes >> 20} MiB or {self.reserve.inodes} files free (other trials write there too)"
            )
        elif not self.peak.complete:
            what = "holds a tree the agent could not walk (nested deeper than it can open, or unreadable)"
        elif self.max_inodes is not None and self.peak.inodes > self.max_inodes:
            what = f"grew to {self.peak.inodes} files and directories, over the sandbox's limit of {self.max_inodes}"
        else:
            what = f"grew to {self.peak.bytes >> 20} MiB, over the sandbox's disk limit of {self.limit >> 20} MiB"
        return "DiskLimitError", (
            f"the script's workspace {what}; it was killed and the files it could write were removed"
        )
