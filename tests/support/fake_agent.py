"""A trivial stand-in for `python -m mle_world.agent`: sleeps, records where it ran, writes result.json.

Reads ckpt.json in the current directory (its 'journal'); writes timeline.jsonl, ckpt.json, result.json.
Modes: ok, agent-fail, infra-fail, crash (exit 1, no result), hang (ignores SIGTERM), checkpoint,
oom (allocates 10 MB a step, up to 4 GB, until a memory limit's OOM killer ends it), until (as ok, but
ends as soon as a file `go` appears in its directory: a test decides when it ends).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path


def main() -> int:
    mode, seconds = sys.argv[1], float(sys.argv[2])
    here = Path.cwd()
    start = time.time()
    ckpt_path = here / "ckpt.json"
    ckpt = json.loads(ckpt_path.read_text()) if ckpt_path.exists() else {"time_used": 0.0, "resumed": -1}
    ckpt["resumed"] += 1
    gpu = os.environ.get("CUDA_VISIBLE_DEVICES")

    def stop(signum: int, frame: object) -> None:
        used = ckpt["time_used"] + time.time() - start
        ckpt_path.write_text(json.dumps({"time_used": used, "resumed": ckpt["resumed"]}))
        with open(here / "timeline.jsonl", "a") as fh:
            fh.write(json.dumps({"event": "checkpoint", "t": time.time(), "gpu": gpu}) + "\n")
        sys.exit(143)

    if mode == "hang":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        # a grandchild in the same process group must die with it
        os.system(f"sleep {seconds} &")
    else:
        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGUSR2, stop)
    # Written once the handlers are in place: a started agent always checkpoints on SIGTERM.
    with open(here / "timeline.jsonl", "a") as fh:
        fh.write(json.dumps({"event": "start", "t": start, "gpu": gpu, "pid": os.getpid()}) + "\n")
    hog = [bytearray(10 * 2**20) for _ in range(400)] if mode == "oom" else []  # touched: resident
    del hog
    remaining = seconds - ckpt["time_used"] if mode == "checkpoint" else seconds
    deadline = time.time() + max(0.0, remaining)
    while time.time() < deadline and not (mode == "until" and (here / "go").exists()):
        time.sleep(0.05)
    with open(here / "timeline.jsonl", "a") as fh:
        fh.write(json.dumps({"event": "end", "t": time.time(), "gpu": gpu}) + "\n")
    if mode == "crash":
        print("Traceback: boom", flush=True)
        return 1
    status = "completed" if mode in ("ok", "checkpoint", "until") else "failed"
    reason = {"agent-fail": "gave up: no valid submission", "infra-fail": "endpoint_unavailable"}.get(
        mode, "max_steps"
    )
    result = {
        "trial_id": json.loads((here / "spec.json").read_text())["trial_id"],
        "status": status,
        "stop_reason": reason,
        "time_used_s": ckpt["time_used"] + time.time() - start,
        "resumed": ckpt["resumed"],
    }
    (here / "result.json").write_text(json.dumps(result))
    return 0 if status == "completed" else 3


if __name__ == "__main__":
    sys.exit(main())
