"""The process tree of one execution: how many tasks (processes and threads) a script holds now, and
killing what is left of it.

Reads /proc (each process's stat line and cwd; loadavg's system-wide task count as a cheap first
check); signals processes, writes nothing. It enforces `sandbox.max_processes` where the kernel does
not: RLIMIT_NPROC exempts host uid 0, which is what a script is under Enroot or pyxis started by root
(docs/threat-model.md).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

SANDBOX_REAPER = -1
"""`adjust` for a sandboxed run: bubblewrap's reaper (PID 1 of the namespace) is not the script's."""
SCRIPT_ROOT = 1
"""`adjust` for an unsandboxed run: the root of the tree is the script itself."""
_PR_SET_CHILD_SUBREAPER = 36
FULL_SCAN_EVERY = 20
"""Count the tree at least every this many checks, whatever the system-wide count says."""


def system_tasks(loadavg: str) -> int:
    """The number of tasks on the machine, from the text of /proc/loadavg ("0.1 0.2 0.3 2/345 678")."""
    return int(loadavg.split()[3].split("/")[1])


def parse_stat(text: str) -> tuple[int, int]:
    """(parent pid, threads) from the text of /proc/<pid>/stat; the command may hold ')' or spaces."""
    rest = text[text.rindex(")") + 2 :].split()
    # After the command: state, ppid, ... ; num_threads is the 20th field of the line (index 17 here).
    return int(rest[1]), int(rest[17])


def tree_tasks(root: int, proc: str = "/proc") -> int:
    """Tasks of every descendant of `root` (not `root` itself); processes that vanish are skipped."""
    return sum(tree_threads(root, proc).values())


def process_table(proc: str = "/proc") -> dict[int, tuple[int, int]]:
    """(parent pid, threads) of every process by pid; processes that vanish meanwhile are skipped."""
    table: dict[int, tuple[int, int]] = {}
    try:
        entries = os.scandir(proc)
    except OSError:
        return table
    with entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                with open(f"{proc}/{entry.name}/stat", encoding="utf-8", errors="replace") as handle:
                    table[int(entry.name)] = parse_stat(handle.read())
            except (OSError, ValueError, IndexError):
                continue
    return table


def tree_threads(root: int, proc: str = "/proc") -> dict[int, int]:
    """Threads of each descendant of `root` (not `root` itself) by pid; processes that vanish are skipped."""
    children: dict[int, list[int]] = {}
    threads: dict[int, int] = {}
    for pid, (ppid, count) in process_table(proc).items():
        children.setdefault(ppid, []).append(pid)
        threads[pid] = count
    tree: dict[int, int] = {}
    stack, seen = list(children.get(root, ())), {root}
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        tree[pid] = threads[pid]
        stack.extend(children.get(pid, ()))
    return tree


def _read(path: str) -> str:
    with open(path, encoding="ascii") as handle:
        return handle.read()


@dataclass
class TaskCeiling:
    """Watches one execution's tree: `exceeded()` is polled while it runs.

    The system-wide task count is one small read; the tree is counted (a scan of /proc) only when
    that count grew by more than the limit since the start, and every FULL_SCAN_EVERY checks
    regardless (other processes on the node may have exited meanwhile). A burst between two checks
    can overshoot the limit by what it creates in one interval; the peak seen is kept.
    """

    root: int
    limit: int
    adjust: int = SANDBOX_REAPER
    """Added to the count of `root`'s descendants to give the script's own tasks."""
    proc: str = "/proc"
    baseline: int = 0
    peak: int = 0
    _checks: int = field(default=0, repr=False)

    def __post_init__(self) -> None:
        self.baseline = self._system()

    def _system(self) -> int:
        try:
            return system_tasks(_read(f"{self.proc}/loadavg"))
        except (OSError, ValueError, IndexError):
            return -1

    def exceeded(self) -> bool:
        self._checks += 1
        system = self._system()
        cheap = system >= 0 and self.baseline >= 0 and system - self.baseline <= self.limit
        if cheap and self._checks % FULL_SCAN_EVERY:
            return False
        count = max(tree_tasks(self.root, self.proc) + self.adjust, 0)
        self.peak = max(self.peak, count)
        return count > self.limit

    @property
    def error(self) -> tuple[str, str]:
        """The exception type and message a run killed by this watch ends with."""
        return "ProcessLimitError", (
            f"the script's processes and threads ({self.peak}) exceeded the sandbox's limit of "
            f"{self.limit}; it was killed"
        )


def enable_subreaper(on: bool = True) -> bool:
    """Adopt orphaned grandchildren (Linux), so a script that escapes its group can still be killed;
    `on=False` stops adopting them (a test process that must not keep its later tests' orphans)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def children_of(pid: int) -> set[int]:
    """The processes whose parent is `pid` now."""
    return {child for child, (ppid, _) in process_table().items() if ppid == pid}


def kill_leftovers(workspace: Path) -> list[int]:
    """Kill processes still running in `workspace` (a script that outlived a kill -9 of the agent).

    Called when a trial (re)starts, so a stale run cannot write into the next run's submission/.
    """
    target = str(workspace.resolve())
    killed: list[int] = []
    try:
        entries = [e for e in os.listdir("/proc") if e.isdigit() and int(e) != os.getpid()]
    except OSError:
        return killed
    for entry in entries:
        try:
            cwd = os.readlink(f"/proc/{entry}/cwd")
        except OSError:
            continue
        if cwd == target or cwd.startswith(target + os.sep):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(entry), signal.SIGKILL)
                killed.append(int(entry))
    return killed


def kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
