"""How a trial's command ended, as its final state: succeeded, or failed with the class that decides
whether it is retried (infra) or settled (agent), and its cause.

Reads the trial's result.json and the end of logs/launcher.log; writes nothing.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from mle_world.layout import TrialFiles
from mle_world.records import AgentResult
from mle_world.storage import Unreadable, load_record

INFRA_STOP_REASONS = (
    *("endpoint", "infra", "connection", "out_of_memory", "oom", "disk", "internal"),
    "sandbox_unavailable",  # the node has no working sandbox (no bubblewrap, no user namespaces)
    "error:",  # what agents before `internal:` wrote for an exception of their own (an image built then)
)
"""Prefixes of the agent's stop_reason that blame the infrastructure, not the agent. Other reasons (of
an agent of another version) blame the agent."""


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def last_log_line(log_path: Path) -> str:
    """The last line of the log's last 4 KiB that is not the launcher's own (the cause's tail)."""
    try:
        with open(log_path, "rb") as handle:
            handle.seek(max(0, handle.seek(0, os.SEEK_END) - 4096))
            lines = [ln.strip() for ln in handle.read().decode("utf-8", "replace").splitlines()]
    except OSError:
        return ""
    lines = [ln for ln in lines if ln and not ln.startswith("[launcher]")]
    return lines[-1][:300] if lines else ""


def read_result(trial_dir: Path) -> AgentResult | None:
    """The agent's result.json; None when it is missing or no valid result."""
    result = load_record(TrialFiles(trial_dir).result, AgentResult)
    return None if isinstance(result, Unreadable) else result


@dataclass(frozen=True)
class Verdict:
    state: Literal["succeeded", "failed"]
    failure_class: Literal["infra", "agent"] | None = None
    cause: str | None = None


def classify(
    exit_code: int, result: AgentResult | None, *, timed_out: bool, limit_text: str, last_line: str
) -> Verdict:
    """Pure mapping of how the command ended to the trial's final state."""
    if timed_out:
        return Verdict("failed", "infra", f"wall limit {limit_text} s exceeded")
    if result is not None and result.status == "completed":
        return Verdict("succeeded")
    if result is not None:
        reason = result.stop_reason
        blame: Literal["infra", "agent"] = (
            "infra" if reason.lower().startswith(INFRA_STOP_REASONS) else "agent"
        )
        return Verdict("failed", blame, f"agent failed: {reason}")
    if exit_code < 0:
        return Verdict("failed", "infra", f"killed by {_signal_name(-exit_code)}")
    if exit_code > 128 and exit_code - 128 in {s.value for s in signal.Signals}:
        return Verdict("failed", "infra", f"killed by {_signal_name(exit_code - 128)}")
    tail = f": {last_line}" if last_line else ""
    return Verdict("failed", "infra", f"exit {exit_code} without result.json{tail}")
