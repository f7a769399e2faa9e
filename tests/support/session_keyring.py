"""A launcher's session keyring holding a secret, and a sandboxed script looking for it: joins a fresh
session keyring, adds a `user` key with a canary payload (as a Kerberos ticket cache of type KEYRING
would hold a ticket), runs the probe through the sandboxed runner, prints its output.

Usage: python session_keyring.py OUT CANARY
Writes under OUT only; the keyring goes with this process's session.
"""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

from agent_helpers import sandbox_layout

from mle_world.agent.sandbox.interpreter import ProcessRunner
from mle_world.agent.sandbox.jail import build_jail
from mle_world.agent.sandbox.syscall_filter import KEYCTL
from mle_world.records import SandboxSettings

ADD_KEY = {"x86_64": 248, "aarch64": 217}
PROBE = """
import ctypes, os, struct
libc = ctypes.CDLL(None, use_errno=True)
KEYCTL, ADD_KEY = {keyctl}, {add_key}
def call(*args):
    rc = libc.syscall(*[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return rc, os.strerror(ctypes.get_errno()) if rc < 0 else ""
print("proc/keys:", open("/proc/keys").read())
session, why = call(KEYCTL, 0, -3, 0)  # KEYCTL_GET_KEYRING_ID of the session keyring
print("session keyring:", session, why)
buf = ctypes.create_string_buffer(4096)
listed = call(KEYCTL, 11, -3, buf, 4096)  # KEYCTL_READ of a keyring: the ids of its keys
print("read session:", listed)
for key in struct.unpack(f"{max(listed[0], 0) // 4}i", buf.raw[: max(listed[0], 0) // 4 * 4]):
    payload = ctypes.create_string_buffer(256)
    size, why = call(KEYCTL, 11, key, payload, 256)
    print("key", key, payload.raw[: max(size, 0)], why)
print("add_key:", call(ADD_KEY, b"user", b"filler", b"x", 1, -3))
"""


def main() -> int:
    out, canary = Path(sys.argv[1]), sys.argv[2]
    machine = os.uname().machine
    libc = ctypes.CDLL(None, use_errno=True)
    keyctl, add_key = KEYCTL[machine], ADD_KEY[machine]
    libc.syscall(keyctl, ctypes.c_long(1), b"launcher-session")  # KEYCTL_JOIN_SESSION_KEYRING
    payload = canary.encode()
    key = libc.syscall(
        add_key, b"user", b"krb-ccache-canary", payload, ctypes.c_long(len(payload)), ctypes.c_long(-3)
    )
    assert key > 0, os.strerror(ctypes.get_errno())
    layout = sandbox_layout(out)
    jail = build_jail(layout.workspace, layout.data_dir, SandboxSettings())
    writable = (layout.workspace, layout.working, layout.tmp, layout.run_submission_dir)
    jail.grant(writable)
    runner = ProcessRunner(layout.workspace, jail=jail, writable=writable, kill_grace_s=1.0)
    code = PROBE.replace("{keyctl}", str(keyctl)).replace("{add_key}", str(add_key))
    print(runner.run(code, args=[], timeout_s=60, log_path=layout.node_logs / "keys.log").term_out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
