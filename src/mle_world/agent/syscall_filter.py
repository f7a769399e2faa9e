"""The seccomp filter that keeps a generated script from making user namespaces of its own or inotify
instances.

Reads nothing; returns a classic-BPF program (bytes) and the Python source that installs it and execs
the script. Why (docs/threat-model.md): an unprivileged process may create a user namespace and hold
every capability inside it, which opens the kernel's namespaced code paths (netfilter, mounts) to it:
there the script mounted tmpfs (memory no limit counts), cgroup v1 and v2 hierarchies (under Enroot or
pyxis started by root, as host uid 0, it made cgroups on the host that outlived the trial; on kernels
before the CVE-2022-0492 fix a v1 `release_agent` runs a program as host root), and netfilter sockets.
Inotify instances are counted per host uid (128 by default) with no limit of the script's own: as host
uid 0 a script took all of them, and every root process of the node (systemd, slurmd, other trials'
agents) failed to make one while it ran.
"""

from __future__ import annotations

import struct

_LD_ABS_W, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_NR, _ARCH, _ARG0 = 0, 4, 16
"""Offsets in `struct seccomp_data`: the syscall number, the ABI, the low 32 bits of the first argument."""
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_EPERM, _EMFILE, _ENOSYS = 1, 24, 38
CLONE_NEWUSER = 0x10000000
X32_SYSCALL_BIT = 0x40000000

ABIS = {
    # AUDIT_ARCH_*: (unshare, clone, clone3, inotify_init and inotify_init1). Each host's compat ABI
    # too (int 0x80 works from a 64-bit x86 process), else a script calls unshare through it.
    0xC000003E: (272, 56, 435, (253, 294)),  # x86_64 (x32 numbers have X32_SYSCALL_BIT: refused below)
    0x40000003: (310, 120, 435, (291, 332)),  # i386
    0xC00000B7: (97, 220, 435, (26,)),  # aarch64 (inotify_init1 only)
    0x40000028: (337, 120, 435, (316, 360)),  # arm
}
"""Every ABI whose syscalls the filter knows; a syscall through any other gets ENOSYS."""
NATIVE_MACHINES = ("x86_64", "aarch64")
"""`platform.machine()` of the hosts where the filter is installed (their ABIs are in ABIS)."""


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> tuple[int, int, int, int]:
    return (code, jt, jf, k)


def script_filter() -> bytes:
    """`struct sock_filter[]`: unshare and clone with CLONE_NEWUSER fail with EPERM, clone3 (whose
    flags live in memory a filter cannot read) with ENOSYS, on which glibc falls back to clone;
    inotify_init(1) with EMFILE, as at the kernel's own limit of instances."""
    program: list[tuple[int, int, int, int]] = [_insn(_LD_ABS_W, _ARCH)]
    blocks: list[list[tuple[int, int, int, int]]] = []
    for unshare, clone, clone3, inotify in ABIS.values():
        # Jump offsets count from the next instruction; each block ends in its own returns.
        block = [
            _insn(_LD_ABS_W, _NR),
            _insn(_JGE, X32_SYSCALL_BIT, 0, 1),
            _insn(_RET, _ERRNO | _ENOSYS),
            _insn(_JEQ, clone3, 0, 1),
            _insn(_RET, _ERRNO | _ENOSYS),
        ]
        for number in inotify:
            block += [_insn(_JEQ, number, 0, 1), _insn(_RET, _ERRNO | _EMFILE)]
        block += [
            _insn(_JEQ, unshare, 1, 0),
            _insn(_JEQ, clone, 0, 3),
            _insn(_LD_ABS_W, _ARG0),
            _insn(_JSET, CLONE_NEWUSER, 0, 1),
            _insn(_RET, _ERRNO | _EPERM),
            _insn(_RET, _ALLOW),
        ]
        blocks.append(block)
    dispatch_len = len(ABIS) + 1  # one jeq per ABI, then the return for an unknown one
    offset = dispatch_len - 1  # from the first jeq's successor to the first block
    for index, block in enumerate(blocks):
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
program = bytes.fromhex(sys.argv[1])
if program:
    libc = ctypes.CDLL(None, use_errno=True)
    buffer = ctypes.create_string_buffer(program, len(program))
    class Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
    fprog = Fprog(len(program) // 8, ctypes.addressof(buffer))
    # PR_SET_SECCOMP, SECCOMP_MODE_FILTER: allowed unprivileged under no_new_privs (set by setpriv before).
    if libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) != 0:
        sys.exit(f"syscall filter: {os.strerror(ctypes.get_errno())}")
os.execv(sys.argv[3], sys.argv[3:])
"""
"""`python -I -S -c INSTALL <program hex, or nothing> -- argv...`: makes the process the OOM killer's
first choice (raising one's own score needs no privilege), installs the filter, then execs argv."""
