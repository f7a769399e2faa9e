"""The workspace's disk limit: counting what a workspace takes, and stopping scripts that fill the disk.

Writes real files under pytest's tmp dirs; runs hostile scripts as real processes (in bubblewrap when
it is installed, where RLIMIT_FSIZE applies too).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import sandbox_layout
from private_tmpfs import in_private_tmpfs

from mle_world.agent.sandbox.disk_quota import DiskCeiling, measure
from mle_world.agent.sandbox.interpreter import ProcessRunner
from mle_world.agent.sandbox.jail import build_jail
from mle_world.agent.sandbox.workspace import remove_entry
from mle_world.records import SandboxSettings

pytestmark = pytest.mark.timeout(120)
MIB = 1 << 20
SUPPORT = Path(__file__).resolve().parents[1] / "support"

FILL_MANY_FILES = """
import os
os.makedirs("working/fill", exist_ok=True)
chunk = os.urandom(1 << 20)
for i in range(100000):  # 1 MiB files: each one under any per-file limit
    target = ("working/fill/" if i % 2 else "tmp/") + f"part{i}"
    with open(target, "wb") as handle:
        handle.write(chunk)
    with open("written.txt", "w") as handle:
        handle.write(str(i + 1))
print("filled the disk", i)
"""


def _write(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(os.urandom(size))


def test_usage_counts_allocated_bytes_once_per_inode_and_never_follows_links(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    _write(root / "a.bin", 3 * MIB)
    os.link(root / "a.bin", root / "hardlink.bin")
    outside = tmp_path / "outside.bin"
    _write(outside, 5 * MIB)
    (root / "escape").symlink_to(outside)
    (root / "dir-escape").symlink_to(tmp_path)
    with open(root / "sparse.bin", "wb") as handle:
        handle.truncate(50 * MIB)  # takes (almost) nothing
    used = measure(root)
    assert 3 * MIB <= used.bytes < 4 * MIB
    assert used.inodes == 4  # a.bin (linked twice, one inode), sparse.bin and the two links
    (tmp_path / "ws-link").symlink_to(root)  # the root itself is followed, as os.walk followed it
    assert measure(tmp_path / "ws-link") == used


CEILING_PRELUDE = """
import json, os, sys
from pathlib import Path
from mle_world.agent.sandbox.disk_quota import DiskCeiling
MIB = 1 << 20
workspace, neighbour = Path(sys.argv[1]) / "ws", Path(sys.argv[1]) / "other-trial"
workspace.mkdir()
neighbour.mkdir()
def write(path, size):
    path.write_bytes(os.urandom(size))
seen = []
"""


def _ceiling_checks(tmp_path: Path, body: str) -> list[Any]:
    """`body` run on a tmpfs of its own (CEILING_PRELUDE before it), what it appended to `seen`: the
    ceiling's cheap check compares the file system's used blocks and inodes between two walks, and on a
    shared /tmp other processes deleting files in between hid this test's growth from it."""
    out = tmp_path / "fs"
    script = CEILING_PRELUDE + body + "\nprint(json.dumps(seen))\n"
    proc = in_private_tmpfs(out, [sys.executable, "-c", script, str(out)], size="32m")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return list(json.loads(proc.stdout))


def test_the_ceiling_counts_only_its_own_workspace(tmp_path: Path) -> None:
    seen = _ceiling_checks(
        tmp_path,
        """
ceiling = DiskCeiling(workspace, 4 * MIB)
write(neighbour / "big.bin", 8 * MIB)  # the file system grows past the room: the workspace is walked
seen.append(ceiling.exceeded())
write(workspace / "small.bin", 2 * MIB)
seen.append(ceiling.exceeded())
write(workspace / "more.bin", 3 * MIB)
seen += [ceiling.exceeded(), ceiling.peak.bytes, *ceiling.error]
""",
    )
    assert seen[:3] == [False, False, True], seen
    assert seen[3] >= 5 * MIB
    assert seen[4] == "DiskLimitError" and "disk limit of 4 MiB" in seen[5]


def test_the_ceiling_counts_files_that_take_no_space(tmp_path: Path) -> None:
    seen = _ceiling_checks(
        tmp_path,
        """
ceiling = DiskCeiling(workspace, 1 << 40, max_inodes=100)
for i in range(90):
    (workspace / f"empty-{i}").touch()
seen.append(ceiling.exceeded())
for i in range(20):
    (workspace / f"more-{i}").touch()
seen += [ceiling.exceeded(), ceiling.peak.inodes, *ceiling.error]
""",
    )
    assert seen[:3] == [False, True, 110], seen
    assert (
        seen[3] == "DiskLimitError"
        and "110 files and directories, over the sandbox's limit of 100" in seen[4]
    )


def _unsandboxed(tmp_path: Path, **limits: Any) -> tuple[Path, ProcessRunner]:
    """A workspace with `working/` and `tmp/`, and a runner without the sandbox watching it."""
    workspace = tmp_path / "ws"
    for name in ("working", "tmp"):
        (workspace / name).mkdir(parents=True)
    writable = (workspace, workspace / "working", workspace / "tmp")
    return workspace, ProcessRunner(workspace, writable=writable, **limits)


def test_a_script_making_empty_files_without_end_is_killed(tmp_path: Path) -> None:
    workspace, runner = _unsandboxed(tmp_path, disk_limit=1 << 40, max_files=500)
    code = "import os\nfor i in range(10**7):\n    os.close(os.open(f'working/e{i}', os.O_CREAT | os.O_WRONLY))\nprint('done')\n"
    result = runner.run(code, args=[], timeout_s=90, log_path=tmp_path / "run.log")
    assert result.exc_type == "DiskLimitError" and "over the sandbox's limit of 500" in result.term_out
    assert "done" not in result.term_out and not any((workspace / "working").iterdir())


def _check_filled_and_cleared(
    term_out: str, exc_type: str | None, workspace: Path, limit_mb: int, entries: list[str]
) -> None:
    assert exc_type == "DiskLimitError", term_out[-2000:]
    assert f"disk limit of {limit_mb} MiB" in term_out
    assert "filled the disk" not in term_out
    # What the script wrote is gone (runfile.py, written.txt, the parts) and the dirs it writes to
    # are back, empty.
    assert sorted(p.name for p in workspace.iterdir()) == sorted(entries)
    assert not any((workspace / "working").iterdir()) and not any((workspace / "tmp").iterdir())
    assert measure(workspace).bytes < MIB


def test_a_script_filling_the_disk_without_sandbox_is_killed_and_its_files_removed(tmp_path: Path) -> None:
    workspace, runner = _unsandboxed(tmp_path, kill_grace_s=1.0, disk_limit=24 * MIB)
    result = runner.run(FILL_MANY_FILES, args=[], timeout_s=90, log_path=tmp_path / "run.log")
    assert not result.timed_out and not result.ok
    _check_filled_and_cleared(result.term_out, result.exc_type, workspace, 24, ["tmp", "working"])


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_in_the_sandbox_many_files_hit_the_ceiling_and_one_big_file_the_kernels_limit(tmp_path: Path) -> None:
    layout = sandbox_layout(tmp_path)
    jail = build_jail(layout.workspace, layout.data_dir, SandboxSettings(disk_mb=24))
    writable = (layout.workspace, layout.working, layout.tmp, layout.run_submission_dir)
    runner = ProcessRunner(layout.workspace, jail=jail, writable=writable, kill_grace_s=1.0)
    assert runner.disk_limit == 24 * MIB

    result = runner.run(FILL_MANY_FILES, args=[], timeout_s=90, log_path=tmp_path / "many.log")
    entries = ["input", "submission", "tmp", "working"]
    _check_filled_and_cleared(result.term_out, result.exc_type, layout.workspace, 24, entries)
    assert (layout.input / "train.csv").read_text() == "id,y\n1,2\n"  # the data view stays

    # One file past the limit: the kernel stops the write itself (RLIMIT_FSIZE; also for host uid 0).
    # The agent's own watch is set far higher here, so only the kernel's bound can act.
    kernel_only = ProcessRunner(layout.workspace, jail=jail, writable=writable, disk_limit=1 << 40)
    big = "data = b'x' * (1 << 20)\nwith open('working/big.bin', 'wb') as h:\n    for _ in range(40):\n        h.write(data)\n"
    result = kernel_only.run(big, args=[], timeout_s=90, log_path=tmp_path / "big.log")
    assert result.exc_type == "OSError" and "File too large" in result.term_out, result.term_out[-2000:]
    assert (layout.working / "big.bin").stat().st_size == 24 * MIB
    # Under the agent's watch that file alone fills the limit: the run is over it, its files removed.
    result = runner.run(big, args=[], timeout_s=90, log_path=tmp_path / "big2.log")
    assert result.exc_type == "DiskLimitError", result.term_out[-2000:]
    assert not (layout.working / "big.bin").exists()

    # A script within the limit is left alone, its files kept.
    fine = "open('working/ok.bin', 'wb').write(b'y' * (4 << 20))\nprint('fine')\n"
    result = runner.run(fine, args=[], timeout_s=90, log_path=tmp_path / "fine.log")
    assert result.ok and "fine" in result.term_out, result.term_out[-2000:]
    assert (layout.working / "ok.bin").stat().st_size == 4 << 20


DEEP_TREE = """
import os
def nest(levels, name, data):
    # Nested through relative opens: the full path outgrows PATH_MAX, never handed to the kernel.
    fd = os.open(".", os.O_RDONLY)
    for _ in range(levels):
        os.mkdir(name, dir_fd=fd)
        child = os.open(name, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = child
    out = os.open("data.bin", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
    os.write(out, data)
    os.close(out)
    os.close(fd)
os.chdir("working")
"""


def _nest(root: Path, levels: int, name: str, size: int) -> None:
    root.mkdir(parents=True, exist_ok=True)
    code = DEEP_TREE.replace('os.chdir("working")', f"os.chdir({str(root)!r})")
    # The tree is built by chdir-ing into it, which the test's process must not keep: the test then
    # deletes it, and every later test of an xdist worker inherited a removed working directory.
    here = os.getcwd()
    try:
        exec(code + f"nest({levels}, {name!r}, b'x' * {size})", {})  # noqa: S102 - the test's own code
    finally:
        os.chdir(here)


def test_usage_counts_what_lies_past_path_max_and_past_the_recursion_limit(tmp_path: Path) -> None:
    # A script can nest directories deeper than a path can name (ENAMETOOLONG) or os.walk can
    # recurse (RecursionError): what lies there is counted all the same, and the walk does not fail.
    _nest(tmp_path / "long", 20, "d" * 250, 4 * MIB)
    used = measure(tmp_path / "long")
    assert used.complete and used.inodes == 21 and used.bytes >= 4 * MIB
    try:
        _nest(tmp_path / "deep", 3000, "d", MIB)
        used = measure(tmp_path / "deep")
        assert used.complete and used.inodes == 3001 and used.bytes >= MIB
    finally:
        remove_entry(tmp_path / "deep")  # pytest's own clean-up recurses (RecursionError at exit)
    ceiling = DiskCeiling(tmp_path / "long", 2 * MIB)
    assert ceiling.exceeded()


def test_a_tree_deeper_than_the_agent_can_open_counts_as_over_the_limit(tmp_path: Path) -> None:
    # Each level of the walk holds a descriptor; past the process's limit the tree is not known to be
    # under the disk limit, so it is over it.
    _nest(tmp_path / "ws", 200, "d", 0)
    code = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))\n"
        "from mle_world.agent.sandbox.disk_quota import DiskCeiling, measure\n"
        "used = measure(sys.argv[1])\n"
        "ceiling = DiskCeiling(sys.argv[1], 1 << 40)\n"
        "print(used.complete, ceiling.holds(used), ceiling.error[1])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "ws")], capture_output=True, text=True, check=True
    ).stdout
    assert out.startswith("False True ") and "could not walk" in out


def test_a_script_hiding_data_past_path_max_is_killed_and_its_tree_removed(tmp_path: Path) -> None:
    workspace, runner = _unsandboxed(tmp_path, kill_grace_s=1.0, disk_limit=8 * MIB)
    code = DEEP_TREE + (
        "chunk = b'x' * (1 << 20)\n"
        "for i in range(10**6):\n"
        "    nest(20, 'd' * 250, chunk) if i == 0 else None\n"
        "    os.mkdir(f'more{i}')\n"
        "    os.chdir(f'more{i}')\n"
        "    nest(20, 'd' * 250, chunk)\n"
        "    os.chdir('..')\n"
        "print('filled the disk')\n"
    )
    result = runner.run(code, args=[], timeout_s=90, log_path=tmp_path / "run.log")
    assert result.exc_type == "DiskLimitError", result.term_out[-2000:]
    assert "filled the disk" not in result.term_out
    assert sorted(p.name for p in workspace.iterdir()) == ["tmp", "working"]
    assert not any((workspace / "working").iterdir())


def test_a_script_filling_the_disk_through_files_it_removed_but_holds_open_is_killed(tmp_path: Path) -> None:
    # Removed files held open keep their blocks and no walk finds them: the run's open files count,
    # and (as root: /proc's map_files needs CAP_SYS_ADMIN) its mapped ones. 12 MiB held open, 6 mapped.
    limit_mb = 14 if os.geteuid() == 0 else 8
    workspace, runner = _unsandboxed(tmp_path, kill_grace_s=1.0, disk_limit=limit_mb * MIB)
    code = (
        "import ctypes, os, subprocess, sys, time\n"
        "libc = ctypes.CDLL(None)\n"
        "libc.mmap.restype = ctypes.c_void_p\n"
        "libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]\n"
        "held = []\n"
        "for i in range(3):\n"
        "    handle = open(f'working/hidden{i}', 'wb+')\n"
        "    os.unlink(f'working/hidden{i}')\n"
        "    for _ in range(6):\n"
        "        handle.write(os.urandom(1 << 20))\n"
        "    handle.flush()\n"
        "    os.fsync(handle.fileno())\n"
        "    held.append(handle)\n"
        "    if i == 1:  # the second one held by a mapping only\n"
        "        libc.mmap(None, 6 << 20, 1, 1, handle.fileno(), 0)  # PROT_READ, MAP_SHARED; no descriptor kept\n"
        "        handle.close()\n"
        "    if i == 0:  # the first one held by a child process only\n"
        "        child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], pass_fds=[handle.fileno()])\n"
        "        handle.close()\n"
        "time.sleep(80)\n"
        "print('filled the disk unseen')\n"
    )
    result = runner.run(code, args=[], timeout_s=100, log_path=tmp_path / "run.log")
    assert result.exc_type == "DiskLimitError", result.term_out[-2000:]
    assert (
        "filled the disk unseen" not in result.term_out and f"disk limit of {limit_mb} MiB" in result.term_out
    )


def test_a_script_under_its_limit_cannot_fill_the_file_system_it_shares(tmp_path: Path) -> None:
    """disk_mb (100 GiB by default) may be more than the file system has free: a script writing without
    end filled it, every other trial's journal and status.json write then failed with ENOSPC and the
    launcher stopped the whole sweep. Once the file system is within its reserve the run is stopped."""
    out = tmp_path / "fs"
    proc = in_private_tmpfs(
        out, [sys.executable, "shared_disk.py", str(out), "fill"], size="48m", cwd=SUPPORT
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout)
    assert seen["exc_type"] == "DiskLimitError", seen
    assert "half the reserve" in seen["exc_info"] and "less than 24 MiB or 100 files" in seen["exc_info"], (
        seen
    )
    assert "wrote 1 MiB" in seen["log"] and "No space left" not in seen["log"], seen["log"]
    assert seen["workspace_bytes"] < MIB and seen["free_mb"] > 24, seen


def test_a_trial_whose_file_system_is_already_short_fails_as_infrastructure(tmp_path: Path) -> None:
    """Others filled it (finished trials' workspaces, another sweep): no script is blamed and run; the
    trial fails with a stop reason the launcher counts as infra, so --retry-failed reruns it."""
    out = tmp_path / "fs"
    proc = in_private_tmpfs(
        out, [sys.executable, "shared_disk.py", str(out), "agent"], size="48m", cwd=SUPPORT
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout)
    result = seen["result"]
    assert seen["exit"] == 1 and result["status"] == "failed", seen
    assert result["stop_reason"].startswith("infra: disk: the file system holding"), result
    assert "under the sandbox's reserve of 1024 MiB" in result["stop_reason"], result
    assert result["executed"] == 0 and result["exec_time_s"] == 0.0, result


def test_a_file_system_without_an_inode_count_is_not_short_of_inodes(tmp_path: Path) -> None:
    """btrfs (and tmpfs with nr_inodes=0) report 0 inodes of 0 free: read as none left, every trial on
    it would have failed as infra before its first run."""
    out = tmp_path / "fs"
    check = (
        "import sys; from pathlib import Path; from mle_world.agent.sandbox.disk_quota import DiskUsage, check_reserve; "
        f"check_reserve(Path({str(out)!r}), DiskUsage(1 << 20, 10_000)); print('room')"
    )
    proc = in_private_tmpfs(out, [sys.executable, "-c", check], size="8m,nr_inodes=0")
    assert proc.returncode == 0 and proc.stdout.strip() == "room", proc.stderr[-2000:]
