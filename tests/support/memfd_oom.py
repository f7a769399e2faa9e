"""The agent's part in an out-of-memory test: holds memory of its own (as an agent with its journal and
clients does) and runs a script through the sandboxed runner that writes memfd files, memory charged to
the cgroup but in no process's resident set, until the memory limit the caller put this process in.
Prints what the run ended as (JSON); it does so only if the OOM killer spared this process.

Usage: python memfd_oom.py OUT
Writes under OUT only.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from agent_helpers import sandbox_layout

from mle_world.agent.sandbox.interpreter import ProcessRunner
from mle_world.agent.sandbox.jail import build_jail
from mle_world.records import SandboxSettings

MEMFD = """
import os
chunk = b"x" * (1 << 20)
fds = []
for i in range(64):  # up to 2 GiB, 32 MiB a file: far past the limit
    fd = os.memfd_create(f"part{i}")
    for _ in range(32):
        os.write(fd, chunk)
    fds.append(fd)
    print(f"held {32 * (i + 1)} MiB", flush=True)
print("held it all")
"""


def main() -> int:
    layout = sandbox_layout(Path(sys.argv[1]))
    jail = build_jail(layout.workspace, layout.data_dir, SandboxSettings())
    writable = (layout.workspace, layout.working, layout.tmp, layout.run_submission_dir)
    jail.grant(writable)
    runner = ProcessRunner(layout.workspace, jail=jail, writable=writable, kill_grace_s=1.0)
    own = bytearray(120 << 20)  # resident: larger than the script's own resident set
    own[:: 1 << 12] = b"x" * len(own[:: 1 << 12])
    result = runner.run(MEMFD, args=[], timeout_s=120, log_path=layout.node_logs / "memfd.log")
    print(json.dumps({"ok": result.ok, "exit_code": result.exit_code, "term_out": result.term_out[-1000:]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
