"""The file system an output dir lives on, and whether its file locks reach the other nodes: with
`--backend slurm` the launcher (login node) and the trials' jobs (compute nodes) update status.json
under a lock (`state._locked`), which only excludes each other if the lock is seen cluster-wide.

Reads /proc/self/mountinfo; writes nothing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Mount:
    point: str
    fstype: str
    options: frozenset[str]
    """Per-mount and super-block options together (`local_lock=all`, `localflock`, ...)."""
    root: str = "/"
    """The dir of its file system mounted there (a cgroup hierarchy's, say: `/` or a sub-cgroup)."""


def _unescape(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as octal (\040 ...)
    return field.encode().decode("unicode_escape") if "\\" in field else field


def parse_mountinfo(text: str) -> list[Mount]:
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        if "-" not in fields[6:]:
            continue
        dash = fields.index("-", 6)
        if len(fields) < dash + 3:
            continue
        options = set(fields[5].split(","))
        if len(fields) > dash + 3:
            options |= set(fields[dash + 3].split(","))
        mounts.append(Mount(_unescape(fields[4]), fields[dash + 1], frozenset(options), _unescape(fields[3])))
    return mounts


def mount_of(path: Path, mounts: list[Mount]) -> Mount | None:
    """The mount holding `path` (the longest mount point above it; the last one mounted wins)."""
    target = os.path.realpath(path)
    best: Mount | None = None
    for mount in mounts:
        point = mount.point.rstrip("/") or "/"
        if target == point or target.startswith(point + "/") or point == "/":
            if best is None or len(point) >= len(best.point.rstrip("/") or "/"):
                best = mount
    return best


def node_local_locks(path: Path, mountinfo: str | None = None) -> str | None:
    """Why file locks under `path` would not exclude a process on another node (None: no known reason).

    NFS: `local_lock=flock|all` or `nolock` keep flock on the client. Lustre: `localflock` does, and
    `noflock` refuses it. BeeGFS: local unless its client sets `tuneUseGlobalFileLocks` (not visible
    in the mount options)."""
    if mountinfo is None:
        try:
            mountinfo = Path("/proc/self/mountinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
    mount = mount_of(path, parse_mountinfo(mountinfo))  # realpath: a dir not made yet is its parent's
    if mount is None:
        return None
    fs, opts = mount.fstype, mount.options
    if fs in ("nfs", "nfs4"):
        local = sorted(opts & {"local_lock=flock", "local_lock=all", "nolock"})
        return f"{fs} mounted with {local[0]} ({mount.point})" if local else None
    if fs == "lustre":
        local = sorted(opts & {"localflock", "noflock"})
        return f"lustre mounted with {local[0]} ({mount.point})" if local else None
    if fs == "beegfs":
        return f"beegfs ({mount.point}), whose locks are node-local unless its client sets tuneUseGlobalFileLocks"
    return None


def lock_warning(output_dir: Path, mountinfo: str | None = None) -> str | None:
    """The warning a Slurm launch prints when the output dir's locks stay on one node."""
    reason = node_local_locks(output_dir, mountinfo)
    if reason is None:
        return None
    return (
        f"--output-dir {output_dir} is on {reason}: file locks there do not reach other nodes, yet the "
        "launcher and the trials' jobs on compute nodes update each status.json under one (a re-run's "
        "reconciliation and a running job can lose each other's write). Use a file system with cluster-wide "
        "locks (NFS with lockd or NFSv4 without local_lock, Lustre mounted with flock)"
    )
