"""A trial dir on the small tmpfs OUT that the caller mounts (tests/support/private_tmpfs.py); prints
what it saw as JSON.

Usage: python shared_disk.py OUT fill|agent
`fill`: a script writing without end, run by the sandboxed runner, whose disk_mb is far above the file
system's size (as a default 100 GiB is above what many shared scratch file systems have free).
`agent`: the real agent (`python -m mle_world.agent`) with the default 1 GiB reserve, more than OUT has.
Writes under OUT only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from agent_helpers import coder_reply, good_script, make_competition, make_spec, sandbox_layout
from fakeserver import FakeOpenAIServer

from mle_world.agent.sandbox.interpreter import ProcessRunner
from mle_world.agent.sandbox.jail import build_jail
from mle_world.records import SandboxSettings

FILL = """
import os, time
chunk = os.urandom(1 << 20)
for i in range(100000):
    with open(("working/" if i % 2 else "tmp/") + f"part{i}", "wb") as handle:
        handle.write(chunk)
    print(f"wrote {i + 1} MiB", flush=True)
    time.sleep(0.02)  # a disk's pace, not memory's: the watch polls every 20 ms
"""
RESERVE_MB = 24


def agent(out: Path) -> dict[str, object]:
    public, _ = make_competition(out / "competition")
    with (
        FakeOpenAIServer("fake-coder", default=coder_reply(good_script(0.5))) as coder,
        FakeOpenAIServer("fake-feedback", default="{}") as feedback,
    ):
        spec = make_spec(out, public, {"coder": coder, "feedback": feedback})
        trial = Path(spec.paths.trial_dir)
        command = [sys.executable, "-m", "mle_world.agent", "--spec", str(trial / "spec.json")]
        proc = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    return {"exit": proc.returncode, "result": json.loads((trial / "result.json").read_text())}


def fill(out: Path) -> dict[str, object]:
    layout = sandbox_layout(out)
    settings = SandboxSettings(disk_mb=1 << 20, disk_reserve_mb=RESERVE_MB, files_reserve=100)
    jail = build_jail(layout.workspace, layout.data_dir, settings)
    writable = (layout.workspace, layout.working, layout.tmp, layout.run_submission_dir)
    jail.grant(writable)
    runner = ProcessRunner(layout.workspace, jail=jail, writable=writable, kill_grace_s=1.0)
    result = runner.run(FILL, args=[], timeout_s=100, log_path=layout.node_logs / "fill.log")
    # Another trial's records on the same file system still fit.
    (out / "other-journal.json").write_bytes(b"x" * (4 << 20))
    free = os.statvfs(out)
    return {
        "exc_type": result.exc_type,
        "exc_info": result.exc_info,
        "log": (layout.node_logs / "fill.log").read_text()[-2000:],
        "workspace_bytes": result.workspace_bytes,
        "free_mb": free.f_bavail * free.f_frsize >> 20,
    }


def main() -> int:
    out, mode = Path(sys.argv[1]), sys.argv[2]
    print(json.dumps(fill(out) if mode == "fill" else agent(out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
