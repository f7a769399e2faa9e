"""Runs a generated script as `python runfile.py [args]`, inside the inner sandbox when there is one.

Reads the code to run; writes it to the workspace, keeps a bounded head and tail of its output in a log
file, reports the workspace's disk usage, kills leftovers.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from mle_world.agent.llm.redaction import Redactor
from mle_world.agent.sandbox.capture import BoundedCapture, truncate_output
from mle_world.agent.sandbox.disk_quota import DiskCeiling, DiskUsage, check_reserve, measure
from mle_world.agent.sandbox.jail import SEARCH_PATHS, Jail, SandboxUnavailable, absolute_entries
from mle_world.agent.sandbox.process_tree import (
    SANDBOX_REAPER,
    SCRIPT_ROOT,
    TaskCeiling,
    children_of,
    kill_group,
)
from mle_world.agent.sandbox.workspace import DATA_VIEW, SCRATCH, empty_dir, remove_entry, restore_dirs

CEILING_POLL_S = 0.02
"""How often a run's ceilings are checked (process_tree.TaskCeiling, disk_quota.DiskCeiling)."""
_EXC_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning))(?::|$)")
_PASSTHROUGH = (
    "CUDA_VISIBLE_DEVICES",
    "NVIDIA_VISIBLE_DEVICES",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "LD_LIBRARY_PATH",
)


@dataclass(frozen=True)
class ExecResult:
    """AIDE's ExecutionResult plus the exit code and the log file holding the full output."""

    term_out: str
    exec_time: float
    exit_code: int | None
    timed_out: bool
    exc_type: str | None
    exc_info: str | None
    log_path: Path
    output_bytes: int = 0
    """Everything the script wrote; the log keeps at most the runner's cap of it."""
    workspace_bytes: int | None = None

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


class Ceiling(Protocol):
    """A bound the agent enforces on a run while it lasts (polled; the run is killed when exceeded)."""

    def exceeded(self) -> bool: ...

    @property
    def error(self) -> tuple[str, str]:
        """(exception type, message) of a run killed for exceeding it."""
        ...


class CodeRunner(Protocol):
    """Runs one script to completion or timeout; the plug-in point for executing candidates."""

    def run(self, code: str, *, args: Sequence[str], timeout_s: float, log_path: Path) -> ExecResult: ...

    def terminate(self) -> None:
        """Kill whatever is running now (called on SIGTERM and at exit)."""
        ...


def child_environment(
    workspace: Path, parent: Mapping[str, str], *, tmpdir: str | None = None
) -> dict[str, str]:
    """A clean environment built from scratch: never the parent's (which holds endpoint keys)."""
    env = {
        "PATH": absolute_entries(parent.get("PATH", "")) or "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(workspace),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "TMPDIR": tmpdir or str(workspace / SCRATCH),
        "MPLBACKEND": "Agg",
    }
    for name in _PASSTHROUGH:
        value = parent.get(name)
        if value is not None and name in SEARCH_PATHS:
            value = absolute_entries(value) or None
        if value is not None:
            env[name] = value
    return env


def write_script(workspace: Path, name: str, code: str) -> None:
    """Replace `workspace/name` with a new file; whatever a script left there (a link, a directory tree
    nested past Python's recursion limit) is removed first, never followed."""
    path = workspace / name
    remove_entry(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(code)


def exception_of(output: str) -> tuple[str | None, str | None]:
    """The last `SomeError: message` line of a traceback, if any."""
    for line in reversed(output.strip().splitlines()):
        match = _EXC_LINE.match(line.strip())
        if match:
            return match.group(1).rsplit(".", 1)[-1], line.strip()
    return None, None


def _wait(proc: subprocess.Popen[bytes], deadline: float, ceilings: Sequence[Ceiling]) -> Ceiling | str:
    """How the run ended: "exited", "timeout", or the ceiling it exceeded (the process still runs)."""
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return "timeout"
        try:
            proc.wait(timeout=min(remaining, CEILING_POLL_S) if ceilings else remaining)
            return "exited"
        except subprocess.TimeoutExpired:
            for ceiling in ceilings:
                if ceiling.exceeded():
                    return ceiling


def _started(started_r: int) -> bool:
    """Whether the jail's last step wrote its byte (read without waiting: every writer is gone); closes it."""
    try:
        os.set_blocking(started_r, False)
        return os.read(started_r, 1) == b"1"
    except BlockingIOError:
        return False
    finally:
        os.close(started_r)


class ProcessRunner:
    """A `CodeRunner` that writes `runfile.py` into the workspace and runs it as a child process.

    With a `Jail` the script runs in the inner sandbox (its own namespaces, uid and limits) and all its
    processes die with it. Without one (`--no-sandbox`) it runs as the agent in a new session; on
    timeout the group gets SIGTERM, then SIGKILL after `kill_grace_s`; the group is SIGKILLed
    afterwards and orphans adopted through the subreaper are killed too, so nothing outlives a run.
    Output is read through a pipe: the log keeps a bounded head and tail, with secrets redacted.
    """

    def __init__(
        self,
        workspace: Path,
        *,
        python: str = sys.executable,
        kill_grace_s: float = 5.0,
        environ: Mapping[str, str] | None = None,
        file_name: str = "runfile.py",
        seed: int | None = None,
        jail: Jail | None = None,
        output_limit: int = 1 << 20,
        redactor: Redactor | None = None,
        writable: Sequence[Path] = (),
        max_tasks: int | None = None,
        disk_limit: int | None = None,
        max_files: int | None = None,
        disk_reserve: DiskUsage | None = None,
    ) -> None:
        self.workspace = workspace
        self.seed = seed
        self.python = python
        self.kill_grace_s = kill_grace_s
        self.environ = dict(os.environ if environ is None else environ)
        self.file_name = file_name
        self.jail = jail
        self.output_limit = output_limit
        self.redactor = redactor or Redactor()
        self.writable = tuple(writable) or (workspace,)
        # The sandbox's max_processes, enforced by the agent too: the kernel's RLIMIT_NPROC is void
        # for host uid 0 (Enroot or pyxis started by root).
        self.max_tasks = max_tasks if max_tasks is not None or jail is None else jail.settings.max_processes
        if disk_limit is None and jail is not None and jail.settings.disk_mb is not None:
            disk_limit = jail.settings.disk_mb << 20
        self.disk_limit = disk_limit
        """Bytes the workspace may take while a script runs (`sandbox.disk_mb`); None: unwatched."""
        self.max_files = max_files if max_files is not None or jail is None else jail.settings.max_files
        """Files and directories the workspace may hold (`sandbox.max_files`; watched with disk_limit)."""
        if disk_reserve is None and jail is not None and jail.settings.disk_reserve_mb is not None:
            disk_reserve = DiskUsage(jail.settings.disk_reserve_mb << 20, jail.settings.files_reserve or 0)
        self.disk_reserve = disk_reserve
        """What the workspace's file system keeps free while a script runs (`sandbox.disk_reserve_mb`)."""
        self._current: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    def command(self, args: Sequence[str], started_fd: int | None = None) -> tuple[list[str], dict[str, str]]:
        """The argv and environment of one run (inside the jail, its environment is set by bwrap;
        `started_fd` hears when the jail is up: `Jail.command`)."""
        argv = [self.python, self.file_name, *args]
        env = child_environment(self.workspace, self.environ, tmpdir=None if self.jail is None else "/tmp")
        if self.seed is not None:
            env["MLE_SEED"] = str(self.seed)  # the prompt asks scripts to seed their RNGs from it
            # str hashes, so the order of a set of column names or labels (`list(set(df.columns))`,
            # `max(set(labels), key=labels.count)`), are otherwise random per process: two runs of
            # one script with one seed wrote different submissions.
            env["PYTHONHASHSEED"] = str(self.seed % 4294967296)
        if self.jail is None:
            return argv, env
        return self.jail.command(argv, env, started_fd), {}

    def run(self, code: str, *, args: Sequence[str], timeout_s: float, log_path: Path) -> ExecResult:
        check_reserve(self.workspace, self.disk_reserve)
        write_script(self.workspace, self.file_name, code)
        # The last run may have removed working/ or left a link there: a real directory again. tmp/ is
        # bound on /tmp and /dev/shm, and bubblewrap makes mount points inside it (for what it shows
        # under /tmp), following what a script left there: empty, before any bind.
        empty_dir(self.workspace / SCRATCH)
        restore_dirs([p for p in self.writable if p not in (self.workspace, self.workspace / SCRATCH)])
        if self.jail is not None:
            self.jail.grant(self.writable)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        # Whether the sandbox got as far as starting the script: a step of it that failed on a crowded
        # node (no namespace left, a process limit) read as the script's failure, a buggy node.
        started_r, started_w = os.pipe() if self.jail is not None else (None, None)
        argv, env = self.command(args, started_w)
        before = children_of(os.getpid())
        capture = BoundedCapture(self.output_limit)
        start = time.monotonic()
        timed_out = False
        over: Ceiling | None = None
        try:
            proc = subprocess.Popen(
                argv,
                cwd=self.workspace,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
                pass_fds=() if started_w is None else (started_w,),
            )
        except BaseException:
            if started_r is not None:
                os.close(started_r)
            raise
        finally:
            if started_w is not None:
                os.close(started_w)
        if self.jail is not None:
            # The killer's next choice after the script: bubblewrap's outer process (its death takes
            # the sandbox down). Memory the script wrote into memfd files stays charged while it exits,
            # after the killer has marked it done; the next pick among processes at an equal score was
            # the agent, the largest resident set (seen: the agent ended by SIGKILL, the trial lost).
            # Raising one's own child's score needs no privilege.
            with contextlib.suppress(OSError):
                Path(f"/proc/{proc.pid}/oom_score_adj").write_text("1000")
        assert proc.stdout is not None
        reader = threading.Thread(target=capture.drain, args=(proc.stdout,), daemon=True)
        reader.start()
        with self._lock:
            self._current = proc
        ceilings: list[Ceiling] = []
        if self.max_tasks is not None:
            adjust = SCRIPT_ROOT if self.jail is None else SANDBOX_REAPER
            ceilings.append(TaskCeiling(proc.pid, self.max_tasks, adjust))
        disk = (
            None
            if self.disk_limit is None and self.disk_reserve is None
            else DiskCeiling(
                self.workspace,
                sys.maxsize if self.disk_limit is None else self.disk_limit,
                self.max_files,
                pid=proc.pid,
                reserve=self.disk_reserve,
            )
        )
        if disk is not None:
            ceilings.append(disk)
        try:
            ending = _wait(proc, start + max(timeout_s, 0.01), ceilings)
            if not isinstance(ending, str):
                over = ending
                # Killing bubblewrap's outer process takes its PID namespace down with it.
                kill_group(proc.pid, signal.SIGKILL)
                proc.wait()
            elif ending == "timeout":
                timed_out = True
                kill_group(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=self.kill_grace_s)
                except subprocess.TimeoutExpired:
                    kill_group(proc.pid, signal.SIGKILL)
                    proc.wait()
        finally:
            exec_time = time.monotonic() - start
            self._cleanup(proc, before)
            # Every writer is dead now (the sandbox's PID namespace, or the killed group and strays).
            reader.join(timeout=30)
            proc.stdout.close()
        if started_r is not None:
            began = _started(started_r)
            if not began and ending == "exited" and (proc.returncode or 0) > 0:
                # bubblewrap or a step after it exited before the script could start: the node's failure.
                said = capture.render().decode("utf-8", errors="replace").strip().splitlines()
                raise SandboxUnavailable(
                    f"the sandbox did not start the script (exit {proc.returncode}"
                    + (f": {said[-1][:300]})" if said else ")")
                )
        usage = measure(self.workspace)
        # A run that left the workspace over the limit (grown between two checks, or one file at
        # RLIMIT_FSIZE) is over it too: the next run would start without room.
        if disk is not None and (over is disk or (over is None and disk.holds(usage))):
            over = disk
            self.clear_workspace()
            usage = measure(self.workspace)
        text = self.redactor.data(capture.render())
        log_path.write_bytes(text)
        output = truncate_output(text.decode("utf-8", errors="replace"))
        exit_code = proc.returncode
        if timed_out:
            exc_type: str | None = "TimeoutError"
            exc_info: str | None = f"Execution exceeded the time limit of {timeout_s:.0f} seconds"
            footer = f"TimeoutError: Execution exceeded the time limit of {timeout_s:.0f} seconds"
        elif over is not None:
            exc_type, exc_info = over.error
            footer = f"{exc_type}: {exc_info}"
        else:
            exc_type, exc_info = (None, None) if exit_code == 0 else exception_of(output)
            if exit_code != 0 and exc_type is None:
                exc_type, exc_info = "ProcessExit", f"the script exited with code {exit_code}"
            footer = f"Execution time: {exec_time:.2f} seconds (time limit is {timeout_s:.0f} seconds)."
        return ExecResult(
            term_out=f"{output}\n{footer}" if output else footer,
            exec_time=exec_time,
            exit_code=None if timed_out else exit_code,
            timed_out=timed_out,
            exc_type=exc_type,
            exc_info=exc_info,
            log_path=log_path,
            output_bytes=capture.total,
            workspace_bytes=usage.bytes,
        )

    def clear_workspace(self) -> None:
        """Remove everything a script could write (the writable dirs are left empty): after a run that
        filled the disk, so the next one has room. The public data view (read-only) stays."""
        keep = {Path(p).name for p in self.writable if Path(p) != self.workspace}
        with os.scandir(self.workspace) as entries:
            names = [e.name for e in entries if e.name != DATA_VIEW]
        for name in names:
            remove_entry(self.workspace / name)
        for name in sorted(keep):
            (self.workspace / name).mkdir(exist_ok=True)

    def _cleanup(self, proc: subprocess.Popen[bytes], before: set[int]) -> None:
        # Background children that stayed in the group die with it.
        kill_group(proc.pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        # Children that called setsid() left the group; with the subreaper they are ours now.
        for _ in range(3):
            strays = children_of(os.getpid()) - before - {proc.pid}
            if not strays:
                break
            for pid in strays:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
                with contextlib.suppress(ChildProcessError, OSError):
                    os.waitpid(pid, 0)
            time.sleep(0.05)
        with self._lock:
            self._current = None

    def terminate(self) -> None:
        with self._lock:
            proc = self._current
        if proc is not None and proc.poll() is None:
            kill_group(proc.pid, signal.SIGKILL)
