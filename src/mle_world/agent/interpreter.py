"""Runs a generated script as `python runfile.py [args]` in its own process group.

Reads the code to run; writes it to the workspace, streams its output to a log file, kills leftovers.
"""

from __future__ import annotations

import contextlib
import ctypes
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

HEAD_CHARS = 2500
TAIL_CHARS = 2500
_PR_SET_CHILD_SUBREAPER = 36
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

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


class CodeRunner(Protocol):
    """Runs one script to completion or timeout; the plug-in point for executing candidates."""

    def run(self, code: str, *, args: Sequence[str], timeout_s: float, log_path: Path) -> ExecResult: ...

    def terminate(self) -> None:
        """Kill whatever is running now (called on SIGTERM and at exit)."""
        ...


def child_environment(workspace: Path, parent: Mapping[str, str]) -> dict[str, str]:
    """A clean environment built from scratch: never the parent's (which holds endpoint keys)."""
    env = {
        "PATH": parent.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": str(workspace),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "TMPDIR": str(workspace / "tmp"),
        "MPLBACKEND": "Agg",
    }
    for name in _PASSTHROUGH:
        if name in parent:
            env[name] = parent[name]
    return env


def truncate_output(text: str) -> str:
    """AIDE's rule: over 5100 characters keep the first 2500 and the last 2500."""
    if len(text) <= HEAD_CHARS + TAIL_CHARS + 100:
        return text
    return f"{text[:HEAD_CHARS]}\n ... [{len(text) - HEAD_CHARS - TAIL_CHARS} characters truncated] ... \n{text[-TAIL_CHARS:]}"


def read_truncated(path: Path) -> str:
    """Head and tail of a log without loading a huge file."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as handle:
            if size <= HEAD_CHARS + TAIL_CHARS + 100:
                return handle.read().decode("utf-8", errors="replace")
            head = handle.read(HEAD_CHARS).decode("utf-8", errors="replace")
            handle.seek(size - TAIL_CHARS)
            tail = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return f"{head}\n ... [{size - HEAD_CHARS - TAIL_CHARS} bytes truncated] ... \n{tail}"


def exception_of(output: str) -> tuple[str | None, str | None]:
    """The last `SomeError: message` line of a traceback, if any."""
    for line in reversed(output.strip().splitlines()):
        match = _EXC_LINE.match(line.strip())
        if match:
            return match.group(1).rsplit(".", 1)[-1], line.strip()
    return None, None


def enable_subreaper() -> bool:
    """Adopt orphaned grandchildren (Linux), so a script that escapes its group can still be killed."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _children_of(pid: int) -> set[int]:
    found: set[int] = set()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as handle:
                data = handle.read()
        except OSError:
            continue
        # The command name may contain spaces or parentheses; fields resume after the last ')'.
        fields = data[data.rfind(")") + 2 :].split()
        if len(fields) > 1 and fields[1].isdigit() and int(fields[1]) == pid:
            found.add(int(entry))
    return found


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


def _kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


class ProcessRunner:
    """A `CodeRunner` that writes `runfile.py` into the workspace and runs it as a child process.

    The child starts a new session (its own process group); on timeout the group gets SIGTERM,
    then SIGKILL after `kill_grace_s`. Whatever the outcome, the group is SIGKILLed afterwards
    and orphans adopted through the subreaper are killed too, so nothing outlives a run.
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
    ) -> None:
        self.workspace = workspace
        self.seed = seed
        self.python = python
        self.kill_grace_s = kill_grace_s
        self.environ = dict(os.environ if environ is None else environ)
        self.file_name = file_name
        self._current: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    def run(self, code: str, *, args: Sequence[str], timeout_s: float, log_path: Path) -> ExecResult:
        script = self.workspace / self.file_name
        script.write_text(code, encoding="utf-8")
        log_path.parent.mkdir(parents=True, exist_ok=True)
        env = child_environment(self.workspace, self.environ)
        if self.seed is not None:
            env["MLE_SEED"] = str(self.seed)  # the prompt asks scripts to seed their RNGs from it
        before = _children_of(os.getpid())
        start = time.monotonic()
        timed_out = False
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [self.python, self.file_name, *args],
                cwd=self.workspace,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
            )
            with self._lock:
                self._current = proc
            try:
                proc.wait(timeout=max(timeout_s, 0.01))
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=self.kill_grace_s)
                except subprocess.TimeoutExpired:
                    _kill_group(proc.pid, signal.SIGKILL)
                    proc.wait()
            finally:
                exec_time = time.monotonic() - start
                self._cleanup(proc, before)
        output = read_truncated(log_path)
        exit_code = proc.returncode
        if timed_out:
            exc_type: str | None = "TimeoutError"
            exc_info: str | None = f"Execution exceeded the time limit of {timeout_s:.0f} seconds"
            footer = f"TimeoutError: Execution exceeded the time limit of {timeout_s:.0f} seconds"
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
        )

    def _cleanup(self, proc: subprocess.Popen[bytes], before: set[int]) -> None:
        # Background children that stayed in the group die with it.
        _kill_group(proc.pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        # Children that called setsid() left the group; with the subreaper they are ours now.
        for _ in range(3):
            strays = _children_of(os.getpid()) - before - {proc.pid}
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
            _kill_group(proc.pid, signal.SIGKILL)
