"""A second launcher on a busy output dir, through the real CLI: refused with one line, nothing written.

Writes a data dir and an output dir under pytest's tmp paths; holds the launcher lock with flock(1).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from e2ekit import cli


def test_refused_launcher_leaves_launch_json_byte_identical(
    tmp_path: Path, data_dir: Path, fast_config: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    before = {
        name: f"previous {name} of the running launcher\n".encode()
        for name in ("launch.json", "agent-config.yaml")
    }
    for name, data in before.items():
        (out / name).write_bytes(data)
    lock = out / ".launcher.lock"
    ready = tmp_path / "locked"
    # The running launcher: a process holding the output dir's lock.
    holder = subprocess.Popen(
        ["flock", "--exclusive", str(lock), "sh", "-c", f"touch {ready}; sleep 120"], start_new_session=True
    )
    try:
        deadline = time.monotonic() + 30
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.exists()
        proc = cli(
            "--config", str(fast_config), "--regime", "ungated", "--runtime", "process", "--backend", "local",
            "--data-dir", str(data_dir), "--output-dir", str(out), "--gpu-device", "none", "--no-progress",
            "--no-endpoint-check",
        )  # fmt: skip
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait()
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "another launcher is running" in proc.stderr and "Traceback" not in proc.stderr
    for name, data in before.items():
        assert (out / name).read_bytes() == data, name
    assert sorted(p.name for p in out.iterdir()) == [".launcher.lock", "agent-config.yaml", "launch.json"]
