"""The seccomp filter that keeps a generated script from making user namespaces of its own, inotify
or fanotify instances, or keys, and from changing its core dump limit.

Reads nothing; returns a classic-BPF program (bytes) and the Python source that installs it and execs
the script. Why (docs/threat-model.md): an unprivileged process may create a user namespace and hold
every capability inside it, which opens the kernel's namespaced code paths (netfilter, mounts) to it:
there the script mounted tmpfs (memory no limit counts), cgroup v1 and v2 hierarchies (under Enroot or
pyxis started by root, as host uid 0, it made cgroups on the host that outlived the trial; on kernels
before the CVE-2022-0492 fix a v1 `release_agent` runs a program as host root), and netfilter sockets.
Inotify instances are counted per host uid (128 by default) with no limit of the script's own: as host
uid 0 a script took all of them, and every root process of the node (systemd, slurmd, other trials'
agents) failed to make one while it ran; fanotify groups likewise (128 per host uid, taken in a test
here by one script; fapolicyd or an on-access scanner runs as root and needs one). Keys likewise count per host uid, and the script possessed the
session keyring of whoever started the launcher (a Kerberos ticket cache of type KEYRING lives there).
And the script keeps RLIMIT_CORE at 1, the one limit at which a crash starts no core_pattern pipe helper
(root on the host).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

_LD_ABS_W, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_NR, _ARCH, _ARG0, _ARG1, _ARG2 = 0, 4, 16, 24, 32
"""Offsets in `struct seccomp_data`: the syscall number, the ABI, the low 32 bits of the first three
arguments (their high halves 4 bytes further: little-endian hosts only, as NATIVE_MACHINES are)."""
RLIMIT_CORE = 4
CORE_LIMIT = 1
"""The script's RLIMIT_CORE, soft and hard: the one value at which the kernel writes no core file and
starts no `core_pattern` pipe helper (any other limit, 0 included, leaves a pipe helper running)."""
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_EPERM, _EMFILE, _ENOSYS = 1, 24, 38
CLONE_NEWUSER = 0x10000000
X32_SYSCALL_BIT = 0x40000000


@dataclass(frozen=True)
class Abi:
    """One system call ABI's numbers of the calls the filter judges."""

    unshare: int
    clone: int
    clone3: int
    watchers: tuple[int, ...]
    """inotify_init, inotify_init1 and fanotify_init (refused with EMFILE)."""
    keys: tuple[int, ...]
    """add_key, request_key and keyctl (refused with EPERM)."""
    setrlimit: int
    prlimit64: int
    """Both refused (EPERM) for RLIMIT_CORE only, prlimit64 only when it sets a limit (`_core_limit`)."""


ABIS = {
    # AUDIT_ARCH_*. Each host's compat ABI too (int 0x80 works from a 64-bit x86 process), else a
    # script makes the same calls through it.
    0xC000003E: Abi(
        272, 56, 435, (253, 294, 300), (248, 249, 250), 160, 302
    ),  # x86_64 (x32: X32_SYSCALL_BIT, refused)
    0x40000003: Abi(310, 120, 435, (291, 332, 338), (286, 287, 288), 75, 340),  # i386
    0xC00000B7: Abi(97, 220, 435, (26, 262), (217, 218, 219), 164, 261),  # aarch64 (no inotify_init)
    0x40000028: Abi(337, 120, 435, (316, 360, 367), (309, 310, 311), 75, 369),  # arm
}
"""Every ABI whose syscalls the filter knows; a syscall through any other gets ENOSYS."""
KEYCTL = {"x86_64": 250, "aarch64": 219}
"""keyctl's number on each native machine: INSTALL gives the script an empty session keyring with it."""
NATIVE_MACHINES = ("x86_64", "aarch64")
"""`platform.machine()` of the hosts where the filter is installed (their ABIs are in ABIS)."""


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> tuple[int, int, int, int]:
    return (code, jt, jf, k)


def _core_limit(abi: Abi) -> list[tuple[int, int, int, int]]:
    """setrlimit(RLIMIT_CORE, ...) and prlimit64(pid, RLIMIT_CORE, new != NULL, ...) fail with EPERM: the
    script keeps CORE_LIMIT. Lowering one's own limit needs no privilege, and at 0 a crash ran the node's
    core_pattern pipe helper (systemd-coredump, apport) as root on the host. Both halves of `new` are
    read: a pointer whose low half is 0 (an mmap at a 4 GiB boundary) is no NULL."""
    allow, eperm = _insn(_RET, _ALLOW), _insn(_RET, _ERRNO | _EPERM)
    return [
        _insn(_JEQ, abi.setrlimit, 0, 4),
        _insn(_LD_ABS_W, _ARG0),
        _insn(_JEQ, RLIMIT_CORE, 0, 1),
        eperm,
        allow,
        _insn(_JEQ, abi.prlimit64, 0, 8),
        _insn(_LD_ABS_W, _ARG1),
        _insn(_JEQ, RLIMIT_CORE, 0, 5),
        _insn(_LD_ABS_W, _ARG2),
        _insn(_JEQ, 0, 0, 2),
        _insn(_LD_ABS_W, _ARG2 + 4),
        _insn(_JEQ, 0, 1, 0),
        eperm,
        allow,
    ]


def script_filter() -> bytes:
    """`struct sock_filter[]`: unshare and clone with CLONE_NEWUSER fail with EPERM, clone3 (whose
    flags live in memory a filter cannot read) with ENOSYS, on which glibc falls back to clone;
    inotify_init(1) and fanotify_init with EMFILE, as at the kernel's own limit of instances; the
    keyring calls with EPERM; a change of RLIMIT_CORE with EPERM (`_core_limit`)."""
    program: list[tuple[int, int, int, int]] = [_insn(_LD_ABS_W, _ARCH)]
    blocks: list[list[tuple[int, int, int, int]]] = []
    for abi in ABIS.values():
        # Jump offsets count from the next instruction; each block ends in its own returns.
        block = [
            _insn(_LD_ABS_W, _NR),
            _insn(_JGE, X32_SYSCALL_BIT, 0, 1),
            _insn(_RET, _ERRNO | _ENOSYS),
            _insn(_JEQ, abi.clone3, 0, 1),
            _insn(_RET, _ERRNO | _ENOSYS),
        ]
        for number in abi.watchers:
            block += [_insn(_JEQ, number, 0, 1), _insn(_RET, _ERRNO | _EMFILE)]
        for number in abi.keys:
            block += [_insn(_JEQ, number, 0, 1), _insn(_RET, _ERRNO | _EPERM)]
        block += _core_limit(abi)
        block += [
            _insn(_JEQ, abi.unshare, 1, 0),
            _insn(_JEQ, abi.clone, 0, 3),
            _insn(_LD_ABS_W, _ARG0),
            _insn(_JSET, CLONE_NEWUSER, 0, 1),
            _insn(_RET, _ERRNO | _EPERM),
            _insn(_RET, _ALLOW),
        ]
        blocks.append(block)
    dispatch_len = len(ABIS) + 1  # one jeq per ABI, then the return for an unknown one
    offset = dispatch_len - 1  # from the first jeq's successor to the first block
    for index, block in enumerate(blocks):
        assert offset - index < 256, "a BPF jump offset is 8 bits"
        program.append(_insn(_JEQ, list(ABIS)[index], offset - index, 0))
        offset += len(block)
    program.append(_insn(_RET, _ERRNO | _ENOSYS))
    for block in blocks:
        program += block
    return b"".join(struct.pack("=HBBI", *insn) for insn in program)


INSTALL = """
import ctypes, os, sys
# The OOM killer's first choice, before the agent, the launcher and every other trial: memory the script
# holds outside its processes' RSS (memfd or shared memory written, not mapped) is not what the killer
# weighs, so at an equal score it ended the agent (seen: a trial failed as infra, the script unharmed).
with open("/proc/self/oom_score_adj", "w") as handle:
    handle.write("1000")
libc = ctypes.CDLL(None, use_errno=True)
# A session keyring of its own, empty (KEYCTL_JOIN_SESSION_KEYRING, no name): it possessed the
# launcher's, whose keys (a Kerberos ticket cache of type KEYRING, say) it could read.
if sys.argv[2]:
    libc.syscall(int(sys.argv[2]), ctypes.c_long(1), None)
program = bytes.fromhex(sys.argv[1])
if program:
    buffer = ctypes.create_string_buffer(program, len(program))
    class Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
    fprog = Fprog(len(program) // 8, ctypes.addressof(buffer))
    # PR_SET_SECCOMP, SECCOMP_MODE_FILTER: allowed unprivileged under no_new_privs (set by setpriv before).
    if libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) != 0:
        sys.exit(f"syscall filter: {os.strerror(ctypes.get_errno())}")
# Only now into the workspace: every step before ran from the read-only root, so none of them (nor this
# interpreter) could load a library a script left in its workspace through a relative search path.
os.chdir(sys.argv[3])
# The sandbox is up: one byte tells the agent so, and the descriptor is closed before the script runs
# (it can neither say so itself nor keep the agent from hearing it).
if sys.argv[4]:
    os.write(int(sys.argv[4]), b"1")
    os.close(int(sys.argv[4]))
os.execv(sys.argv[6], sys.argv[6:])
"""
"""`python -I -S -c INSTALL <program hex, or nothing> <keyctl's number, or nothing> <workdir> <started fd,
or nothing> -- argv...`: makes the process the OOM killer's first choice (raising one's own score needs no
privilege), gives it an empty session keyring, installs the filter, enters workdir, writes a byte to the
started fd, then execs argv."""
