"""Interpreter tests: timeouts, process-group kills, clean environment, output truncation.

Reads nothing; runs tiny scripts in a tmp workspace.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mle_world.agent.sandbox.capture import truncate_output
from mle_world.agent.sandbox.interpreter import ProcessRunner, child_environment, exception_of
from mle_world.agent.sandbox.process_tree import enable_subreaper, kill_leftovers

pytestmark = pytest.mark.timeout(60)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


@pytest.fixture
def runner(tmp_path: Path) -> ProcessRunner:
    workspace = tmp_path / "ws"
    (workspace / "tmp").mkdir(parents=True)
    return ProcessRunner(
        workspace, kill_grace_s=1.0, environ={"PATH": os.environ["PATH"], "SECRET_KEY": "s3cret"}
    )


def test_success_output_and_footer(runner, tmp_path):
    result = runner.run(
        "import sys\nprint('hello', sys.argv[1:])\n",
        args=["--debug"],
        timeout_s=10,
        log_path=tmp_path / "a.log",
    )
    assert result.ok and result.exit_code == 0 and result.exc_type is None
    assert "hello ['--debug']" in result.term_out and "Execution time:" in result.term_out
    assert "hello" in (tmp_path / "a.log").read_text()


def test_exception_is_reported(runner, tmp_path):
    result = runner.run("raise KeyError('target')\n", args=[], timeout_s=10, log_path=tmp_path / "b.log")
    assert not result.ok and result.exc_type == "KeyError" and result.exit_code == 1
    assert "Traceback" in result.term_out


def test_sleeping_script_is_killed_at_timeout(runner, tmp_path):
    """A runner that waited for the script would hang past the test's timeout (no timer needed here:
    a bound on seconds fails on a loaded machine)."""
    result = runner.run(
        "import time\nprint('start', flush=True)\ntime.sleep(3600)\n",
        args=[],
        timeout_s=1,
        log_path=tmp_path / "c.log",
    )
    assert result.timed_out and result.exc_type == "TimeoutError" and result.exit_code is None
    assert "TimeoutError: Execution exceeded the time limit" in result.term_out and "start" in result.term_out


def test_sigterm_ignoring_script_is_killed(runner, tmp_path):
    """Killed after the grace period: without the SIGKILL the run would outlast the test's timeout."""
    code = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(3600)\n"
    result = runner.run(code, args=[], timeout_s=0.5, log_path=tmp_path / "d.log")
    assert result.timed_out and result.exc_type == "TimeoutError" and result.exit_code is None


@pytest.fixture
def subreaper() -> Iterator[None]:
    """This process a subreaper for one test: left on, every orphan of the worker's later tests (inner
    bubblewrap processes of killed runs) stays its zombie child for the rest of the session."""
    assert enable_subreaper()
    try:
        yield
    finally:
        assert enable_subreaper(on=False)


def test_forked_children_are_all_killed(runner, tmp_path, subreaper):
    pids = tmp_path / "pids.txt"
    # Every process of this script carries the marker in its command line (forks inherit it), so
    # the sweep below finds only this test's processes, whatever else runs on the machine.
    marker = f"mle-forked-{os.getpid()}-{time.monotonic_ns()}"
    code = f"""
import os, subprocess, sys, time
procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", sys.argv[1]]) for _ in range(2)]
with open({str(pids)!r}, "w") as f:
    f.write(" ".join(str(p.pid) for p in procs))
pid = os.fork()
if pid == 0:
    os.setsid()  # escapes the process group: only the subreaper sweep catches it
    if os.fork() == 0:
        time.sleep(120)
    os._exit(0)
print("children started", flush=True)
time.sleep(120)
"""
    # 4 s: the pids are written right after the children start, well within it on a loaded machine
    result = runner.run(code, args=[marker], timeout_s=4, log_path=tmp_path / "e.log")
    assert result.timed_out
    children = [int(p) for p in pids.read_text().split()]

    def leftovers() -> list[str]:
        return [p for p in os.listdir("/proc") if p.isdigit() and _alive(int(p)) and marker in _cmdline(p)]

    deadline = time.monotonic() + 30  # killed processes may take a moment to be reaped
    while (leftovers() or any(_alive(pid) for pid in children)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in children)
    assert leftovers() == []


def test_background_children_die_even_when_script_exits_normally(runner, tmp_path):
    code = "import subprocess, sys\np = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\nprint(p.pid)\n"
    result = runner.run(code, args=[], timeout_s=10, log_path=tmp_path / "f.log")
    assert result.ok
    pid = int(result.term_out.split()[0])
    deadline = time.monotonic() + 30  # a killed process may take a moment to be reaped
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)


def _cmdline(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def test_environment_is_clean(runner, tmp_path):
    code = "import json, os\nprint(json.dumps(sorted(os.environ)))\n"
    result = runner.run(code, args=[], timeout_s=10, log_path=tmp_path / "g.log")
    assert "SECRET_KEY" not in result.term_out and "s3cret" not in result.term_out
    env = child_environment(tmp_path, {"PATH": "/bin", "OPENAI_API_KEY": "k", "CUDA_VISIBLE_DEVICES": "3"})
    assert env["CUDA_VISIBLE_DEVICES"] == "3" and "OPENAI_API_KEY" not in env and env["HOME"] == str(tmp_path)


def test_output_is_tail_truncated(runner, tmp_path):
    result = runner.run(
        "print('x' * 100000)\nprint('THE END')\n", args=[], timeout_s=10, log_path=tmp_path / "h.log"
    )
    assert len(result.term_out) < 6000 and "THE END" in result.term_out and "truncated" in result.term_out
    assert len(truncate_output("y" * 10000)) < 5200


def test_exception_parsing():
    out = "Traceback (most recent call last):\n  File 'x'\nnumpy.linalg.LinAlgError: Singular matrix\n"
    assert exception_of(out) == ("LinAlgError", "numpy.linalg.LinAlgError: Singular matrix")
    assert exception_of("all good") == (None, None)


def test_kill_leftovers_in_workspace(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    import subprocess
    import sys

    stale = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], cwd=workspace)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], cwd=tmp_path)
    try:
        time.sleep(0.2)
        assert kill_leftovers(workspace) == [stale.pid]
        assert stale.wait(timeout=5) == -9 and other.poll() is None
    finally:
        other.kill()
        other.wait()
