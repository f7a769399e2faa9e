"""The inner sandbox, output bounds, redaction and the submission hand-over, with real processes.

Reads nothing; runs tiny scripts through bubblewrap in tmp workspaces (skipped without bubblewrap).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from agent_helpers import sandbox_layout

from mle_world.agent.llm.redaction import Redactor
from mle_world.agent.sandbox.capture import BoundedCapture
from mle_world.agent.sandbox.interpreter import ProcessRunner
from mle_world.agent.sandbox.jail import (
    SIGPENDING,
    SandboxUnavailable,
    build_jail,
    effective_capabilities,
    is_mapped,
)
from mle_world.agent.sandbox.syscall_filter import ABIS, CLONE_NEWUSER, KEYCTL, X32_SYSCALL_BIT, script_filter
from mle_world.agent.sandbox.workspace import TrialLayout, reset_run_submission, stage_submission
from mle_world.records import SandboxSettings

pytestmark = pytest.mark.timeout(120)
SUPPORT = Path(__file__).resolve().parents[1] / "support"
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")


def _runner(layout: TrialLayout, settings: SandboxSettings, **kwargs) -> ProcessRunner:  # type: ignore[no-untyped-def]
    jail = build_jail(layout.workspace, layout.data_dir, settings)
    return ProcessRunner(
        layout.workspace,
        jail=jail,
        writable=(layout.workspace, layout.working, layout.tmp, layout.run_submission_dir),
        kill_grace_s=1.0,
        output_limit=settings.output_kb << 10,
        **kwargs,
    )


def test_bounded_capture_keeps_head_and_tail_and_states_the_drop() -> None:
    capture = BoundedCapture(100)
    for i in range(1000):
        capture.feed(f"{i:04d}\n".encode())
    text = capture.render()
    assert capture.total == 5000 and len(text) < 200
    assert text.startswith(b"0000\n") and text.endswith(b"0999\n")
    assert b"[... 4900 bytes of output dropped" in text


def test_redactor_replaces_known_values_longest_first() -> None:
    redactor = Redactor({"A": "sk-abcdef", "B": "sk-abcdef-longer", "C": "none"})
    assert redactor.text("x sk-abcdef-longer y sk-abcdef none") == "x [REDACTED:B] y [REDACTED:A] none"
    assert redactor.data(b"sk-abcdef") == b"[REDACTED:A]"


def test_capability_and_map_parsing() -> None:
    assert effective_capabilities("Name:\tx\nCapEff:\t0000000000000080\n") == 0x80
    assert is_mapped(65534, "0 0 4294967295\n") and not is_mapped(65534, "0 1000 1\n")


def test_root_that_cannot_switch_uid_is_refused(tmp_path: Path) -> None:
    layout = TrialLayout(tmp_path / "trial", tmp_path / "data")
    with pytest.raises(SandboxUnavailable, match="without the right to switch"):
        build_jail(
            layout.workspace,
            layout.data_dir,
            SandboxSettings(),
            status_text="CapEff:\t0000000000000000\n",
            uid_map="0 0 4294967295",
            gid_map="0 0 4294967295",
            uid=0,
        )


def test_trial_dir_under_a_shown_system_path_is_refused() -> None:
    with pytest.raises(SandboxUnavailable, match="which the sandbox shows"):
        build_jail(Path("/opt/runs/t/workspace"), Path("/data/public"), SandboxSettings())


@needs_bwrap
def test_script_output_is_bounded_and_secrets_redacted(tmp_path: Path) -> None:
    layout = sandbox_layout(tmp_path)
    runner = _runner(layout, SandboxSettings(output_kb=8), redactor=Redactor({"KEY": "sk-visible-canary"}))
    code = "import sys\nprint('sk-visible-canary')\nsys.stdout.write('z' * 10_000_000)\nprint('last line')\n"
    result = runner.run(code, args=[], timeout_s=60, log_path=tmp_path / "run.log")
    log = (tmp_path / "run.log").read_bytes()
    assert result.ok and result.output_bytes > 10_000_000
    assert len(log) < 9 * 1024 and b"sk-visible-canary" not in log and b"[REDACTED:KEY]" in log
    assert b"bytes of output dropped" in log and log.rstrip().endswith(b"last line")
    assert "sk-visible-canary" not in result.term_out and result.workspace_bytes is not None


@needs_bwrap
def test_script_runs_unprivileged_in_its_own_namespaces(tmp_path: Path) -> None:
    layout = sandbox_layout(tmp_path)
    runner = _runner(layout, SandboxSettings(max_processes=32, memory_mb=128))
    code = (
        "import os\n"
        "status = open('/proc/self/status').read()\n"
        "print([l for l in status.splitlines() if l.startswith(('CapEff', 'CapBnd', 'NoNewPrivs'))])\n"
        "print('pids', sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))\n"
        "print('trial', os.listdir('..'))\n"
        "try:\n    bytearray(512 << 20)\nexcept MemoryError:\n    print('memory bounded')\n"
    )
    result = runner.run(code, args=[], timeout_s=60, log_path=tmp_path / "run.log")
    out = result.term_out
    assert result.ok, out
    assert "CapEff:\\t0000000000000000" in out and "CapBnd:\\t0000000000000000" in out
    assert "NoNewPrivs:\\t1" in out and "memory bounded" in out
    assert "trial ['workspace']" in out  # the agent's files are not in view
    pids = eval(out.split("pids ", 1)[1].splitlines()[0])  # noqa: S307 - our own printed list
    assert max(pids) < 10  # its own PID namespace: the agent (and its keys in /proc) are not there


@needs_bwrap
def test_a_linked_submission_is_refused_and_a_real_one_hashed(tmp_path: Path) -> None:
    layout = sandbox_layout(tmp_path)
    secret = tmp_path / "trial" / "journal.json"
    secret.write_text("agent bookkeeping")
    runner = _runner(layout, SandboxSettings())
    link = f"import os\nos.symlink({str(secret)!r}, 'submission/submission.csv')\n"
    runner.run(link, args=[], timeout_s=60, log_path=tmp_path / "a.log")
    assert os.path.islink(layout.run_submission_csv)
    assert stage_submission(layout) is None and not layout.staged_submission.exists()

    reset_run_submission(layout)
    runner.run(
        "open('submission/submission.csv', 'w').write('id,y\\n1,3\\n')\n",
        args=[],
        timeout_s=60,
        log_path=tmp_path / "b.log",
    )
    digest = stage_submission(layout)
    assert digest == hashlib.sha256(b"id,y\n1,3\n").hexdigest()
    assert layout.staged_submission.read_bytes() == b"id,y\n1,3\n"


@needs_bwrap
def test_runfile_left_as_a_link_is_replaced_not_followed(tmp_path: Path) -> None:
    layout = sandbox_layout(tmp_path)
    spec = tmp_path / "trial" / "spec.json"
    spec.write_text("{}")
    runner = _runner(layout, SandboxSettings())
    (layout.workspace / "runfile.py").unlink(missing_ok=True)
    os.symlink(spec, layout.workspace / "runfile.py")
    result = runner.run("print('fine')\n", args=[], timeout_s=60, log_path=tmp_path / "a.log")
    assert result.ok and spec.read_text() == "{}"


def test_jail_is_not_built_without_bubblewrap(tmp_path: Path) -> None:
    env = {"PATH": str(tmp_path)}
    code = (
        "import sys; from pathlib import Path\n"
        "from mle_world.agent.sandbox.jail import build_jail, SandboxUnavailable\n"
        "from mle_world.records import SandboxSettings\n"
        "try:\n    build_jail(Path('/w/ws'), Path('/d'), SandboxSettings())\n"
        "except SandboxUnavailable as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert "bwrap not found" in out.stdout


@needs_bwrap
def test_the_data_view_cannot_be_replaced_for_later_runs(tmp_path: Path) -> None:
    """`input/` lies in the writable workspace: renamed away (or, where the script's host uid owns it,
    chmod'ed and written), a poisoned copy would feed every later run. It is mounted read-only."""
    layout = sandbox_layout(tmp_path)
    runner = _runner(layout, SandboxSettings())
    attack = (
        "import os\n"
        "for name, act in [('chmod', lambda: os.chmod('input', 0o755)),\n"
        "                  ('plant', lambda: open('input/planted.csv', 'w').write('x')),\n"
        "                  ('unlink', lambda: os.unlink('input/train.csv')),\n"
        "                  ('rename', lambda: os.rename('input', 'input-orig'))]:\n"
        "    try:\n        act()\n        print('done', name)\n"
        "    except OSError as error:\n        print('refused', name, error)\n"
        "os.makedirs('input', exist_ok=True)\n"
        "open('input/train.csv', 'w').write('poisoned\\n')\n"
    )
    first = runner.run(attack, args=[], timeout_s=60, log_path=tmp_path / "a.log")
    assert "done" not in first.term_out, first.term_out
    check = "import os\nprint(sorted(os.listdir('input')), open('input/train.csv').read())\n"
    second = runner.run(check, args=[], timeout_s=60, log_path=tmp_path / "b.log")
    assert "['train.csv'] id,y\n1,2" in second.term_out, second.term_out
    assert sorted(os.listdir(layout.workspace)) == ["input", "runfile.py", "submission", "tmp", "working"]


@needs_bwrap
def test_a_daemon_left_by_a_script_dies_with_its_run(tmp_path: Path) -> None:
    """Double fork, setsid, signals ignored: the daemon still dies before `run` returns (the run's PID
    namespace is emptied), so nothing writes into `submission/` after the agent copied it."""
    layout = sandbox_layout(tmp_path)
    runner = _runner(layout, SandboxSettings())
    daemon = (
        "import fcntl, os, signal, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):\n"
        "            signal.signal(sig, signal.SIG_IGN)\n"
        "        lock = open('working/lock', 'w')\n"
        "        fcntl.flock(lock, fcntl.LOCK_EX)\n"
        "        open('working/ready', 'w').close()\n"
        "        while True:\n"
        "            time.sleep(0.05)\n"
        "            open('submission/submission.csv', 'w').write('id,y\\n1,9\\n')\n"
        "    os._exit(0)\n"
        "while not os.path.exists('working/ready'):\n"
        "    time.sleep(0.01)\n"
        "print('daemon started')\n"
    )
    result = runner.run(daemon, args=[], timeout_s=60, log_path=tmp_path / "a.log")
    assert result.ok and "daemon started" in result.term_out, result.term_out
    with open(layout.working / "lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError while the daemon lives


@needs_bwrap
def test_run_dirs_left_as_links_or_removed_are_made_again_not_followed(tmp_path: Path) -> None:
    """tmp/ is bound on the next run's /tmp: left as a link to the trial dir (or the agent's /proc), it
    showed the bookkeeping (or the agent's environment) where the agent had no uid to drop to; where it
    had, the run refused to start and the trial failed, as it did for a script that removed working/."""
    layout = sandbox_layout(tmp_path)
    (layout.trial_dir / "spec.json").write_text("{}")
    runner = _runner(layout, SandboxSettings())
    plant = (
        "import os, shutil\n"
        "open('tmp/kept', 'w').close()\n"
        "shutil.rmtree('working')\n"
        "os.rename('tmp', 'tmp-real')\n"
        "os.symlink(os.path.dirname(os.getcwd()), 'tmp')\n"
    )
    first = runner.run(plant, args=[], timeout_s=60, log_path=tmp_path / "a.log")
    assert first.ok, first.term_out
    # /dev/shm is always workspace/tmp (/tmp too, unless the trial lies under /tmp, as here).
    look = (
        "import os\nprint(os.listdir('/dev/shm'), os.listdir('working'), os.path.exists('/tmp/spec.json'))\n"
    )
    second = runner.run(look, args=[], timeout_s=60, log_path=tmp_path / "b.log")
    assert second.ok and "[] [] False" in second.term_out, second.term_out
    assert (
        layout.tmp.is_dir() and not layout.tmp.is_symlink() and (layout.workspace / "tmp-real/kept").exists()
    )


@needs_bwrap
@pytest.mark.parametrize("hole", ["end", "middle"])
def test_a_sparse_submission_is_refused(tmp_path: Path, hole: str) -> None:
    """A hole costs the workspace's disk limit nothing but cost its full length in the agent's copy
    (up to disk_mb, 100 GiB by default, written outside the workspace by one run)."""
    layout = sandbox_layout(tmp_path)
    runner = _runner(layout, SandboxSettings(disk_mb=64))
    grow = (
        "handle.truncate(32 << 20)" if hole == "end" else "handle.seek(32 << 20)\n    handle.write(b'1,2\\n')"
    )
    code = (
        f"with open('submission/submission.csv', 'wb') as handle:\n    handle.write(b'id,y\\n')\n    {grow}\n"
    )
    result = runner.run(code, args=[], timeout_s=60, log_path=tmp_path / "a.log")
    assert result.ok and layout.run_submission_csv.stat().st_size >= 32 << 20, result.term_out
    assert result.workspace_bytes is not None and result.workspace_bytes < 1 << 20
    assert stage_submission(layout) is None and not layout.staged_submission.exists()


@needs_bwrap
def test_runfile_left_as_a_deeply_nested_directory_is_removed(tmp_path: Path) -> None:
    """shutil.rmtree recursed into it and raised RecursionError out of run(): the trial failed."""
    layout = sandbox_layout(tmp_path)
    runner = _runner(layout, SandboxSettings())
    nest = (
        "import os\n"
        "os.unlink('runfile.py')\n"
        "os.mkdir('runfile.py')\n"
        "fd = os.open('runfile.py', os.O_RDONLY)\n"
        "for _ in range(3000):\n"
        "    os.mkdir('d', dir_fd=fd)\n"
        "    fd = os.open('d', os.O_RDONLY, dir_fd=fd)\n"
    )
    first = runner.run(nest, args=[], timeout_s=60, log_path=tmp_path / "a.log")
    assert first.ok and (layout.workspace / "runfile.py").is_dir(), first.term_out
    second = runner.run("print('fine')\n", args=[], timeout_s=60, log_path=tmp_path / "b.log")
    assert second.ok and "fine" in second.term_out


@needs_bwrap
@pytest.mark.parametrize(
    "plant",
    [
        "os.mkfifo('submission/submission.csv')",
        "socket.socket(socket.AF_UNIX).bind('submission/submission.csv')",
        "os.makedirs('submission/submission.csv/x')",
    ],
    ids=["fifo", "socket", "directory"],
)
def test_a_special_file_as_submission_is_refused_without_blocking(tmp_path: Path, plant: str) -> None:
    """Opening a FIFO with no writer left blocks, a socket cannot be opened: none is read or copied."""
    layout = sandbox_layout(tmp_path)
    runner = _runner(layout, SandboxSettings())
    result = runner.run(f"import os, socket\n{plant}\n", args=[], timeout_s=60, log_path=tmp_path / "a.log")
    assert result.ok, result.term_out
    assert stage_submission(layout) is None and not layout.staged_submission.exists()
    reset_run_submission(layout)
    assert os.listdir(layout.run_submission_dir) == []


@needs_bwrap
def test_kernel_settings_and_host_devices_are_read_only(tmp_path: Path) -> None:
    """bubblewrap left /proc/sys writable: a script whose host uid is 0 (Enroot or pyxis started by
    root) could set any sysctl, e.g. kernel.core_pattern, which the kernel runs as root on the host."""
    layout = sandbox_layout(tmp_path)
    runner = _runner(layout, SandboxSettings())
    # As uid 65534 here the kernel refuses the write anyway (EACCES); what a host uid 0 would meet is
    # the mount's read-only flag, seen in mountinfo (mount point, then its options).
    # The host's device nodes likewise (a host uid 0 owns them: chmod 000 /dev/null), yet still usable.
    probe = (
        "mounts = [line.split()[4:6] for line in open('/proc/self/mountinfo')]\n"
        "for path in ('/proc/sys', '/dev/null', '/dev/urandom'):\n"
        "    print(path, [options.split(',')[0] for point, options in mounts if point == path])\n"
        "print('ostype', open('/proc/sys/kernel/ostype').read().strip())\n"
        "print('null', open('/dev/null', 'w').write('x'), len(open('/dev/urandom', 'rb').read(4)))\n"
    )
    result = runner.run(probe, args=[], timeout_s=60, log_path=tmp_path / "a.log")
    out = result.term_out
    assert "/proc/sys ['ro']" in out and "ostype Linux" in out, out
    assert "/dev/null ['ro']" in out and "/dev/urandom ['ro']" in out and "null 1 4" in out, out


NESTED_USERNS = """
import ctypes, mmap, os, platform, subprocess, threading
libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWUSER, CLONE_NEWNS = 0x10000000, 0x20000
rc = libc.unshare(CLONE_NEWUSER | CLONE_NEWNS)
print("unshare", rc, os.strerror(ctypes.get_errno()) if rc else "")
tool = subprocess.run(["unshare", "--user", "--map-root-user", "true"], capture_output=True, text=True)
print("unshare tool", tool.returncode)
if platform.machine() == "x86_64":  # the i386 ABI of the same process: int 0x80, unshare is 310
    code = bytes.fromhex("b836010000" "bb00000010" "cd80" "c3")
    page = mmap.mmap(-1, 4096, prot=7)
    page.write(code)
    call = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(page)))
    print("int80", call())
caps = [l for l in open("/proc/self/status") if l.startswith("CapEff")]
print("caps", caps[0].split()[1])
# What ordinary code does still works: threads (clone3, then clone), fork, a subprocess.
worker = threading.Thread(target=print, args=("thread ran",))
worker.start()
worker.join()
pid = os.fork()
if pid == 0:
    os._exit(7)
print("child", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""


@needs_bwrap
def test_a_script_cannot_make_a_user_namespace_of_its_own(tmp_path: Path) -> None:
    """It held every capability there: mounted tmpfs and cgroup hierarchies (under Enroot started by
    root, a cgroup made on the host outlived the trial), opened netfilter sockets."""
    layout = sandbox_layout(tmp_path)
    result = _runner(layout, SandboxSettings()).run(
        NESTED_USERNS, args=[], timeout_s=60, log_path=tmp_path / "a.log"
    )
    out = result.term_out
    assert result.ok, out
    assert "unshare -1 Operation not permitted" in out and "unshare tool 0" not in out, out
    assert "int80 0" not in out and "caps 0000000000000000" in out, out
    assert "thread ran" in out and "child 7" in out, out


def _verdict(program: bytes, arch: int, nr: int, arg0: int, *args: int) -> int:
    """What a classic-BPF seccomp program returns for one syscall (the few opcodes the filter uses)."""
    rest = (*args, 0, 0, 0, 0, 0)[:5]
    data = struct.pack("=iIQ6Q", nr, arch, 0, arg0, *rest)
    insns = [struct.unpack("=HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
    pc = acc = 0
    while True:
        code, jt, jf, k = insns[pc]
        pc += 1
        if code == 0x20:
            acc = struct.unpack_from("=I", data, k)[0]
        elif code == 0x06:
            return k
        else:
            taken = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[code]
            pc += jt if taken else jf


@pytest.mark.parametrize("abi", sorted(ABIS))
def test_the_syscall_filter_refuses_new_user_namespaces_on_every_abi(abi: int) -> None:
    program = script_filter()
    numbers = ABIS[abi]
    unshare, clone, clone3 = numbers.unshare, numbers.clone, numbers.clone3
    eperm, enosys, allow = 0x50001, 0x50026, 0x7FFF0000
    assert _verdict(program, abi, unshare, CLONE_NEWUSER | 0x20000) == eperm
    assert _verdict(program, abi, clone, CLONE_NEWUSER | 17) == eperm
    assert _verdict(program, abi, clone3, 0) == enosys
    assert all(_verdict(program, abi, number, 0) == 0x50018 for number in numbers.watchers)  # EMFILE
    assert all(_verdict(program, abi, number, 0) == eperm for number in numbers.keys)
    # RLIMIT_CORE (4) stays at 1: no change, by either call, through a pointer of any address.
    assert _verdict(program, abi, numbers.setrlimit, 4) == eperm
    assert _verdict(program, abi, numbers.setrlimit, 7) == allow  # RLIMIT_NOFILE
    assert _verdict(program, abi, numbers.prlimit64, 0, 4, 0x7FFE0010) == eperm
    assert _verdict(program, abi, numbers.prlimit64, 0, 4, 0x7E00_0000_0000) == eperm
    assert _verdict(program, abi, numbers.prlimit64, 0, 4, 0, 0x7FFE0010) == allow  # a read
    assert _verdict(program, abi, numbers.prlimit64, 0, 7, 0x7FFE0010) == allow
    assert _verdict(program, abi, unshare, 0x20000) == allow  # other namespaces need capabilities
    assert _verdict(program, abi, clone, 0x01200011) == allow  # fork
    assert _verdict(program, abi, 0, 0) == allow
    assert _verdict(program, 0xC000003E, X32_SYSCALL_BIT | 272, CLONE_NEWUSER) == enosys
    assert _verdict(program, 0x12345678, unshare, 0) == enosys  # an ABI the filter does not know


PER_UID = """
import ctypes, os, signal, threading
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(0)
print("inotify", fd, os.strerror(ctypes.get_errno()) if fd < 0 else "")
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])
queued = 0
try:
    for queued in range(100_000):
        signal.pthread_kill(threading.get_ident(), signal.SIGRTMIN)
except OSError as error:
    print("queued", queued, error)
"""


@needs_bwrap
def test_a_script_cannot_take_what_its_host_uid_shares_with_the_node(tmp_path: Path) -> None:
    """Inotify instances and queued signals are counted per host uid: under Enroot started by root a
    script took all 128 instances and every pending signal of root, and every root process of the
    node (systemd, slurmd, other trials' agents) failed to make one or to queue one while it ran."""
    layout = sandbox_layout(tmp_path)
    result = _runner(layout, SandboxSettings()).run(
        PER_UID, args=[], timeout_s=60, log_path=tmp_path / "a.log"
    )
    out = result.term_out
    assert result.ok, out
    assert "inotify -1 Too many open files" in out, out
    queued = int(out.split("queued ", 1)[1].split()[0])
    assert queued <= SIGPENDING, out


@needs_bwrap
def test_the_oom_killer_ends_the_script_not_its_agent(memory_limit: Path, tmp_path: Path) -> None:
    """Memory a script writes into memfd files is charged to the memory cgroup but to no process's
    resident set, which is what the OOM killer weighs: at equal scores it ended the agent (the trial
    failed as infra, the script unharmed). The script is now the killer's first choice (score 1000)."""
    procs = memory_limit / "cgroup.procs"
    proc = subprocess.run(
        [sys.executable, "memfd_oom.py", str(tmp_path)],
        cwd=SUPPORT,
        preexec_fn=lambda: procs.write_text(str(os.getpid())),  # the agent in the limit, as in a job
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]  # the agent survived
    seen = json.loads(proc.stdout)
    assert not seen["ok"] and "held 32 MiB" in seen["term_out"], seen
    assert "held it all" not in seen["term_out"], seen


@needs_bwrap
def test_the_sandboxs_outer_process_is_the_oom_killers_choice_before_the_agent(tmp_path: Path) -> None:
    """Once the killer has marked a dying script done, the memory its memfd files hold is still charged;
    the next pick was the agent, unless bubblewrap's outer process (outside the script's PID namespace,
    so read here from the host side) also scores 1000."""
    import threading
    import time

    from mle_world.agent.sandbox.process_tree import children_of

    layout = sandbox_layout(tmp_path)
    runner = _runner(layout, SandboxSettings())
    # An earlier test in this worker may have made it a subreaper (test_interpreter does): orphaned
    # inner bwrap processes of earlier runs are then its zombie children, at score 0. Only this run's
    # are watched, and a pid's last reading counts (the first may precede the parent's write).
    before = children_of(os.getpid())
    seen: dict[int, str] = {}
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            for pid in children_of(os.getpid()) - before:
                try:
                    if Path(f"/proc/{pid}/comm").read_text().strip() == "bwrap":
                        seen[pid] = Path(f"/proc/{pid}/oom_score_adj").read_text().strip()
                except OSError:
                    continue
            time.sleep(0.02)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        result = runner.run(
            "import time; time.sleep(1.5)", args=[], timeout_s=60, log_path=tmp_path / "a.log"
        )
    finally:
        done.set()
        watcher.join()
    assert result.ok, result.term_out
    # the outer process is the first to appear; its inner one is reparented here only as it ends
    assert seen and next(iter(seen.values())) == "1000", seen


@needs_bwrap
@pytest.mark.skipif(os.uname().machine not in KEYCTL, reason="the filter knows x86_64 and aarch64")
def test_a_script_neither_reads_nor_fills_the_launchers_session_keyring(tmp_path: Path) -> None:
    """It possessed the session keyring of whoever started the launcher (a Kerberos ticket cache of type
    KEYRING lives there) and read its keys; and keys count per host uid against a quota (for root: every
    root process of the node)."""
    canary = f"CANARY-TGT-{os.getpid()}"
    proc = subprocess.run(
        [sys.executable, "session_keyring.py", str(tmp_path), canary],
        cwd=SUPPORT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert canary not in out and "krb-ccache-canary" not in out, out
    assert "read session: (-1, 'Operation not permitted')" in out, out
    assert "add_key: (-1, 'Operation not permitted')" in out, out


@needs_bwrap
def test_script_has_no_network_a_read_only_host_and_its_limits_in_force(tmp_path: Path) -> None:
    """What the script meets from inside: the test's loopback server unreachable (a network namespace
    of its own), the data dir and / read-only, /dev/shm in the workspace's tmp/, and the process, file
    size and core limits of its settings."""
    import socket

    layout = sandbox_layout(tmp_path)
    settings = SandboxSettings(max_processes=40, disk_mb=64)
    if (
        os.geteuid() == 0
    ):  # the script's own uid owns the data (as in a user's launch): only the mount stops it
        os.chown(layout.data_dir, settings.code_uid, settings.code_uid)
    runner = _runner(layout, settings)
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        code = (
            "import os, resource, socket\n"
            "def attempt(name, act):\n"
            "    try:\n        act()\n        print(name, 'done')\n"
            "    except OSError as error:\n        print(name, 'refused', error.errno)\n"
            f"attempt('connect', lambda: socket.create_connection(('127.0.0.1', {port}), timeout=5).close())\n"
            f"attempt('data', lambda: open({str(layout.data_dir / 'planted.csv')!r}, 'w').close())\n"
            "attempt('root', lambda: open('/pwned-by-sandbox-test', 'w').close())\n"
            "open('/dev/shm/shared', 'w').write('x')\n"
            "for name in ('NPROC', 'FSIZE', 'CORE'):\n"
            "    print(name, resource.getrlimit(getattr(resource, 'RLIMIT_' + name)))\n"
        )
        result = runner.run(code, args=[], timeout_s=60, log_path=tmp_path / "run.log")
    out = result.term_out
    assert result.ok, out
    assert "connect refused" in out and "data refused" in out and "root refused" in out, out
    assert not (layout.data_dir / "planted.csv").exists() and not Path("/pwned-by-sandbox-test").exists()
    assert (layout.tmp / "shared").read_text() == "x"
    assert "NPROC (40, 40)" in out and f"FSIZE ({64 << 20}, {64 << 20})" in out and "CORE (1, 1)" in out


@needs_bwrap
def test_a_sandbox_that_fails_to_start_a_run_is_the_nodes_failure_not_the_scripts(tmp_path: Path) -> None:
    """A step of the sandbox that failed for one run (no namespace or process left on a crowded node)
    read as the script's exit: a buggy node the agent went on to debug. The sandbox's last step now says
    when it starts the script; a script cannot say it (nor keep it from being said) by what it prints."""
    import dataclasses

    layout = sandbox_layout(tmp_path)
    runner = _runner(layout, SandboxSettings())
    fake = "import sys\nprint('bwrap: Creating new namespace failed: No space left on device')\nsys.exit(1)\n"
    result = runner.run(fake, args=[], timeout_s=60, log_path=layout.node_logs / "fake.log")
    assert result.exit_code == 1 and not result.ok and "bwrap: Creating" in result.term_out  # the script's
    assert runner.jail is not None
    broken = dataclasses.replace(
        runner.jail, tools={**runner.jail.tools, "prlimit": shutil.which("false") or "false"}
    )
    runner.jail = broken  # a step before the script exits 1, as a prlimit refused by the kernel would
    with pytest.raises(SandboxUnavailable, match=r"the sandbox did not start the script \(exit 1"):
        runner.run("print('never')\n", args=[], timeout_s=60, log_path=layout.node_logs / "broken.log")
