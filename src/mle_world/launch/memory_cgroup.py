"""The memory cgroup a trial's command runs in (the launcher's or the Slurm job's): how many processes the
kernel's OOM killer ended in it so far, and its memory limit; and the OOM priority of a trial's command.

Reads /proc/self/cgroup, /proc/self/mountinfo (`mounts.parse_mountinfo`) and the cgroup's files (v2:
memory.events, memory.max; v1: memory.oom_control, memory.stat); writes nothing (a trial's shell sets its
own oom_score_adj).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from mle_world.launch.mounts import parse_mountinfo

TRIAL_OOM_SCORE_ADJ = 500
"""Raised for a trial's command (and inherited by the agent and its generated code): when the launcher
shares a memory limit with its trials (a local pool in an allocation), the OOM killer ends a trial, not
the launcher (seen: the launcher, the largest process, was killed and its trial left `running`)."""

_NO_LIMIT = 1 << 62
"""v1 reports 'no limit' as a page-rounded LONG_MAX."""


@dataclass(frozen=True)
class MemoryCgroup:
    path: Path
    top: Path
    """The hierarchy's mount point: the walk up for the effective limit stops there."""
    v2: bool

    def oom_kills(self) -> int | None:
        """Processes the OOM killer ended in this cgroup (v2: with its descendants); None: unreadable."""
        name = "memory.events" if self.v2 else "memory.oom_control"
        try:
            text = (self.path / name).read_text()
        except OSError:
            return None
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
        return None

    def limit_bytes(self) -> int | None:
        """The tightest memory limit over this cgroup and its ancestors; None: none or unreadable."""
        if not self.v2:
            try:
                for line in (self.path / "memory.stat").read_text().splitlines():
                    key, _, value = line.partition(" ")
                    if key == "hierarchical_memory_limit" and value.strip().isdigit():
                        return int(value) if int(value) < _NO_LIMIT else None
            except OSError:
                return None
            return None
        limits = []
        here = self.path
        while True:
            try:
                text = (here / "memory.max").read_text().strip()
            except OSError:
                text = "max"
            if text.isdigit():
                limits.append(int(text))
            if here == self.top or here.parent == here:
                break
            here = here.parent
        return min(limits) if limits else None


def own_memory_cgroup() -> MemoryCgroup | None:
    """This process's memory cgroup (a child started now lands in the same one); None without one."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    found: dict[str, str] = {}
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if controllers == "":
            found.setdefault("v2", path)
        elif "memory" in controllers.split(","):
            found["v1"] = path
    try:
        mountinfo = Path("/proc/self/mountinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for mount in parse_mountinfo(mountinfo):
        v2 = mount.fstype == "cgroup2"
        mine = found.get("v2" if v2 else "v1")
        if mine is None or not (v2 or (mount.fstype == "cgroup" and "memory" in mount.options)):
            continue
        relative = os.path.relpath(mine, mount.root) if mine.startswith(mount.root) else None
        if relative is None or relative.startswith(".."):
            continue
        here = Path(mount.point) / relative if relative != "." else Path(mount.point)
        if (here / ("memory.events" if v2 else "memory.oom_control")).exists():
            return MemoryCgroup(here.resolve(), Path(mount.point), v2)
    return None


OOM_PRIORITY = f"{{ echo {TRIAL_OOM_SCORE_ADJ} >/proc/self/oom_score_adj; }} 2>/dev/null\n"
"""The first line of a trial's `bash -c`: raising the score needs no privilege, and set before the
command forks, every process of the trial inherits it (a kernel without the file keeps today's choice)."""


def oom_cause(cgroup: MemoryCgroup | None, before: int | None) -> str | None:
    """'out of memory: …' when the OOM killer ended processes in `cgroup` since `before` was read."""
    after = cgroup.oom_kills() if cgroup is not None else None
    if cgroup is None or before is None or after is None or after <= before:
        return None
    limit = cgroup.limit_bytes()
    of = f"the memory limit {limit / 2**20:.0f} MiB" if limit else "memory"
    return f"out of memory: the kernel's OOM killer ended {after - before} process(es) at {of} (cgroup {cgroup.path})"
