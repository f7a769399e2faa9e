"""The inner sandbox: how the agent runs a generated script as an untrusted, unprivileged process.

Reads the agent's own credentials from /proc/self (capabilities, uid and gid maps); returns argv lists.
Mechanism (docs/threat-model.md): bubblewrap builds a fresh mount, PID, IPC, UTS (and network)
namespace with a read-only root that shows only system paths, the Python prefixes, the public data
read-only and `workspace/` writable but for its data view `input/`; inside it the script drops to an
unprivileged uid (a real one when the agent is root), enters a user namespace of its own, loses every
capability including the bounding set, gets `no_new_privs`, its resource limits and a seccomp filter that
refuses it user namespaces of its own (`syscall_filter`), becomes the OOM killer's first choice, then
execs Python.
"""

from __future__ import annotations

import os
import platform
import shutil
import stat
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from mle_world.agent.sandbox.syscall_filter import CORE_LIMIT, INSTALL, KEYCTL, NATIVE_MACHINES, script_filter
from mle_world.agent.sandbox.workspace import DATA_VIEW, SCRATCH
from mle_world.records import SandboxSettings

SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc", "/opt")
"""What the script sees of the agent's root besides the Python prefixes (read-only)."""
GPU_DEVICES = tuple(f"/dev/nvidia{i}" for i in range(8)) + (
    "/dev/nvidiactl",
    "/dev/nvidia-uvm",
    "/dev/nvidia-uvm-tools",
    "/dev/dri",
)
PROC_READ_ONLY = ("sys", "sysrq-trigger", "pressure", "fs", "asound", "acpi", "scsi", "driver")
"""Kernel settings under /proc the script sees read-only (Docker's list; bubblewrap covers irq and bus)."""
DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")
"""The host's device nodes bubblewrap's `--dev` binds in. Where the script's host uid is 0 (Enroot or
pyxis started by root) it owns them and could chmod them for the whole node (`chmod 000 /dev/null`):
they are remounted read-only, which stops chmod but not reading or writing the device. bubblewrap's
own read-only mounts add `nodev`, which would break them, hence `_REMOUNT_DEVICES`."""
_REMOUNT_DEVICES = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
end = sys.argv.index("--")
for target in sys.argv[1:end]:
    # MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID: the flags of the bind mount only, devices allowed.
    if libc.mount(None, target.encode(), None, 32 | 4096 | 1 | 2, None) != 0:
        sys.exit(f"read-only {target}: {os.strerror(ctypes.get_errno())}")
os.execv(sys.argv[end + 1], sys.argv[end + 1 :])
"""
"""Run as the sandbox's root before the script's command: bind mounts of devices made read-only."""
TOOLS = ("bwrap", "setpriv", "unshare", "prlimit")
SIGPENDING = 1024
"""RLIMIT_SIGPENDING of a script: queued signals are counted per host uid (96,365 for root here), so a
script that queued its default share blocked every root process's sigqueue, tgkill and POSIX timer."""
MSGQUEUE_BYTES = 131072
"""RLIMIT_MSGQUEUE of a script (one queue of the default size), likewise counted per host uid."""
CODE_ID_IN_NAMESPACE = 65534
"""The uid and gid the script has inside its own user namespace."""
_CAP_SETGID, _CAP_SETUID, _CAP_SETPCAP, _CAP_SYS_ADMIN = 6, 7, 8, 21
_FULL_MAP = ("0", "0", "4294967295")


SEARCH_PATHS = ("PATH", "LD_LIBRARY_PATH")
"""Search paths a run inherits: only their absolute entries (`absolute_entries`)."""


def absolute_entries(value: str) -> str:
    """A colon-separated search path without its empty and relative entries.

    The dynamic loader reads an empty entry (`/usr/local/cuda/lib64:`, what
    `LD_LIBRARY_PATH=X:$LD_LIBRARY_PATH` leaves when it was unset, in a launcher's environment or an
    image's ENV) or a relative one in the current directory: inside the sandbox that was the workspace,
    where the last run's script planted `libcap-ng.so.0`, and the sandbox's own setpriv loaded it as
    host root with every capability.
    """
    return ":".join(entry for entry in value.split(":") if entry.startswith("/"))


class SandboxUnavailable(Exception):
    """The inner sandbox cannot be built here; generated code is never run without it when it is on."""


def effective_capabilities(status_text: str) -> int:
    """The `CapEff` bit set from the text of /proc/self/status."""
    for line in status_text.splitlines():
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)
    return 0


def is_mapped(ident: int, map_text: str) -> bool:
    """Whether `ident` appears inside this user namespace per a /proc/self/{uid,gid}_map text."""
    for line in map_text.splitlines():
        fields = line.split()
        if len(fields) == 3 and int(fields[0]) <= ident < int(fields[0]) + int(fields[2]):
            return True
    return False


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError:
        return ""


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _parents(paths: Sequence[str]) -> list[str]:
    """Every proper ancestor of `paths` (but /), parents first."""
    found: set[str] = set()
    for path in paths:
        parent = os.path.dirname(path.rstrip("/"))
        while parent not in ("/", ""):
            found.add(parent)
            parent = os.path.dirname(parent)
    return sorted(found, key=lambda p: (p.count("/"), p))


def python_paths(executable: str = sys.executable) -> tuple[str, ...]:
    """The interpreter's prefixes (a venv and its base Python), which may lie outside SYSTEM_PATHS."""
    found: list[str] = []
    for raw in (sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(executable))):
        path = os.path.realpath(raw)
        if not any(_under(path, root) for root in (*SYSTEM_PATHS, *found)):
            found = [p for p in found if not _under(p, path)] + [path]
    return tuple(found)


@dataclass(frozen=True)
class Jail:
    """One trial's inner sandbox: `command(argv, env)` wraps a script's argv for `subprocess`."""

    workspace: Path
    data_dir: Path
    settings: SandboxSettings
    read_only: tuple[str, ...]
    tools: Mapping[str, str]
    drop_to: int | None
    """A real uid/gid to switch to first (the agent is root with that id mapped); None keeps the agent's."""
    own_userns: bool
    """The agent lacks CAP_SYS_ADMIN, so bubblewrap must create a user namespace itself."""
    python: str = sys.executable
    """The agent's interpreter (shown read-only), which remounts the devices inside the sandbox."""
    syscall_filter: bytes | None = None
    """The seccomp program that refuses the script new user namespaces (None: not installed)."""

    def command(
        self, argv: Sequence[str], env: Mapping[str, str], started_fd: int | None = None
    ) -> list[str]:
        """The run's command line; `started_fd`: a descriptor (passed to the process) that gets one byte
        once every step of the sandbox is done, right before the script starts."""
        s = self.settings
        ws = str(self.workspace)
        cmd = [self.tools["bwrap"], "--die-with-parent", "--new-session"]
        cmd += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        if not s.network:
            cmd.append("--unshare-net")
        if self.own_userns:
            cmd.append("--unshare-user")
        data = str(self.data_dir)
        if _under(ws, "/tmp") or _under(data, "/tmp"):
            # Binding workspace/tmp over /tmp would hide what lies below it.
            cmd += ["--perms", "1777", "--tmpfs", "/tmp"]
        else:
            cmd += ["--bind", f"{ws}/{SCRATCH}", "/tmp"]
        # bubblewrap would create missing parents of mount points private (0700) to the uid it runs as.
        for parent in _parents([*self.read_only, data, ws]):
            cmd += ["--perms", "0755", "--dir", parent]
        for path in self.read_only:
            cmd += ["--ro-bind-try", path, path]
        # Where the script's host uid is 0 (Enroot or pyxis started by root) the kernel lets it write
        # every sysctl, capabilities or not (core_pattern names a program the kernel runs as root on
        # the host), and bubblewrap leaves /proc/sys writable when it cannot write it itself.
        cmd += ["--proc", "/proc"]
        for entry in PROC_READ_ONLY:
            cmd += ["--ro-bind-try", f"/proc/{entry}", f"/proc/{entry}"]
        cmd += ["--dev", "/dev"]
        for device in GPU_DEVICES:
            cmd += ["--dev-bind-try", device, device]
        # Shared memory on disk in the workspace: counted in its usage, not in the node's RAM.
        cmd += ["--bind", f"{ws}/{SCRATCH}", "/dev/shm"]
        cmd += ["--ro-bind", data, data, "--bind", ws, ws]
        # The data view lies in the writable workspace; as a mount point it can be neither renamed nor
        # replaced, and read-only it cannot be chmod'ed or written where the script's host uid owns it
        # (a user's launch, Enroot started by root): no run can poison what later runs read.
        view = f"{ws}/{DATA_VIEW}"
        cmd += ["--ro-bind", view, view]
        # The sandbox's own steps run from its read-only root, not from the workspace a script wrote:
        # a relative search path (LD_LIBRARY_PATH's empty entry) found the script's libraries there.
        cmd += ["--remount-ro", "/", "--chdir", "/", "--clearenv"]
        for name, value in env.items():
            cmd += ["--setenv", name, value]
        cmd.append("--")
        if not self.own_userns:
            # While the sandbox's root still holds its capabilities: the host's device nodes read-only.
            devices = [f"/dev/{name}" for name in DEV_NODES]
            devices += [d for d in GPU_DEVICES if os.path.exists(d)]
            cmd += [self.python, "-I", "-S", "-c", _REMOUNT_DEVICES, *devices, "--"]
        if self.drop_to is not None:
            ident = str(self.drop_to)
            cmd += [self.tools["setpriv"], f"--reuid={ident}", f"--regid={ident}", "--clear-groups", "--"]
        code_id = str(CODE_ID_IN_NAMESPACE)
        cmd += [self.tools["unshare"], "--user", f"--map-user={code_id}", f"--map-group={code_id}"]
        cmd += ["--keep-caps", "--"]
        cmd += [self.tools["setpriv"], "--no-new-privs", "--bounding-set=-all", "--inh-caps=-all"]
        cmd += ["--ambient-caps=-all", "--"]
        # Pending signals and POSIX message queues are counted per host uid too (for host uid 0: every
        # root process of the node), each process against its own limit: small ones leave the rest room.
        cmd += [
            self.tools["prlimit"],
            f"--core={CORE_LIMIT}",
            f"--sigpending={SIGPENDING}",
            f"--msgqueue={MSGQUEUE_BYTES}",
        ]
        if s.max_processes is not None:
            cmd.append(f"--nproc={s.max_processes}")
        if s.memory_mb is not None:
            cmd.append(f"--data={s.memory_mb << 20}")
        if s.disk_mb is not None:
            cmd.append(f"--fsize={s.disk_mb << 20}")
        cmd.append("--")
        # Last, under no_new_privs: a user namespace of its own would give the script every capability
        # inside it (mounts, netfilter), our own `unshare --user` above included.
        program = "" if self.syscall_filter is None else self.syscall_filter.hex()
        keyctl = str(KEYCTL.get(platform.machine(), ""))
        started = "" if started_fd is None else str(started_fd)
        cmd += [self.python, "-I", "-S", "-c", INSTALL, program, keyctl, ws, started, "--"]
        cmd += argv
        return cmd

    def grant(self, directories: Sequence[Path]) -> None:
        """Hand the directories the script writes to its uid (never following a link it left)."""
        if self.drop_to is None:
            return
        for path in directories:
            info = os.lstat(path)
            if not stat.S_ISDIR(info.st_mode):
                raise SandboxUnavailable(f"{path} is not a directory")
            os.chown(path, self.drop_to, self.drop_to, follow_symlinks=False)

    def probe(self, python: str, env: Mapping[str, str]) -> None:
        """Run an empty script through the jail once; raise with bubblewrap's own words if it fails."""
        try:
            proc = subprocess.run(
                self.command([python, "-c", "pass"], env),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            raise SandboxUnavailable(f"the inner sandbox did not start: {error}") from error
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
            raise SandboxUnavailable(f"the inner sandbox did not start: {last}")


def build_jail(
    workspace: Path,
    data_dir: Path,
    settings: SandboxSettings,
    *,
    python: str = sys.executable,
    status_text: str | None = None,
    uid_map: str | None = None,
    gid_map: str | None = None,
    uid: int | None = None,
) -> Jail:
    """Choose the mechanism from what the agent may do here (root, root in a user namespace, a user)."""
    tools: dict[str, str] = {}
    for name in TOOLS:
        found = shutil.which(name)
        if found is None:
            raise SandboxUnavailable(
                f"{name} not found: the inner sandbox needs bubblewrap and util-linux (setpriv, unshare, "
                "prlimit) where the agent runs"
            )
        tools[name] = os.path.realpath(found)
    read_only = SYSTEM_PATHS + python_paths(python)
    for name, path in tools.items():
        if not any(_under(path, root) for root in read_only):
            raise SandboxUnavailable(f"{name} at {path} would not be visible inside the sandbox")
    hidden = [str(workspace.parent), str(data_dir)]
    for path in read_only:
        for inner in hidden:
            if _under(inner, path):
                raise SandboxUnavailable(f"{inner} lies under {path}, which the sandbox shows read-only")
    caps = effective_capabilities(status_text if status_text is not None else _read("/proc/self/status"))
    uid_text = uid_map if uid_map is not None else _read("/proc/self/uid_map")
    gid_text = gid_map if gid_map is not None else _read("/proc/self/gid_map")
    me = os.getuid() if uid is None else uid
    can_switch = all(caps >> bit & 1 for bit in (_CAP_SETUID, _CAP_SETGID, _CAP_SETPCAP))
    drop_to = None
    if (
        me == 0
        and can_switch
        and is_mapped(settings.code_uid, uid_text)
        and is_mapped(settings.code_uid, gid_text)
    ):
        drop_to = settings.code_uid
    if me == 0 and drop_to is None and tuple(uid_text.split()) == _FULL_MAP:
        raise SandboxUnavailable(
            f"the agent runs as root without the right to switch to uid {settings.code_uid}; "
            "generated code would keep root's file access"
        )
    return Jail(
        workspace=workspace,
        data_dir=data_dir.resolve(),
        settings=settings,
        read_only=read_only,
        tools=tools,
        drop_to=drop_to,
        own_userns=not caps >> _CAP_SYS_ADMIN & 1,
        python=os.path.realpath(python),
        syscall_filter=script_filter() if platform.machine() in NATIVE_MACHINES else None,
    )
