"""One trial as `status OUTPUT_DIR --trial ID` shows it: its status.json, whether its agent still holds
the journal lock, and the last lines of its logs (the launcher's, the agent's and Slurm's).

Reads `<trial>/status.json`, `<trial>/logs/{launcher,agent}.log` and `<output_dir>/slurm/<job>_0_log.out`
(their last 64 KiB); writes nothing.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from mle_world import layout
from mle_world.errors import UserError
from mle_world.launch.liveness import agent_alive
from mle_world.records import TrialStatus
from mle_world.storage import Unreadable, load_record, read_regular

TAIL_BYTES = 64 * 1024
"""Read at most this much from the end of a log: a runaway script's log can be gigabytes."""


@dataclass(frozen=True)
class LogTail:
    path: Path
    lines: tuple[str, ...]
    """The last lines (untrusted: the agent's and the generated code's output; escape before showing)."""


@dataclass(frozen=True)
class TrialTail:
    trial_dir: Path
    status: TrialStatus | None
    problem: str
    """Why status.json could not be read (empty when it could)."""
    agent_alive: bool
    logs: tuple[LogTail, ...]


def tail_lines(path: Path, n: int) -> tuple[str, ...] | None:
    """The last `n` lines of a file, None when it cannot be read."""
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - TAIL_BYTES))
            data = handle.read()
    except OSError:
        return None
    lines = data.decode("utf-8", errors="replace").splitlines()
    if len(data) == TAIL_BYTES and lines:
        lines = lines[1:]  # the first one is cut
    return tuple(lines[-n:]) if n else ()


def find_trial_dir(output_dir: Path, trial: str) -> Path:
    """A trial id (`gated/aide/iris/seed34`, or without its regime) or a trial dir → the trial dir.

    A UserError when OUTPUT_DIR has no such trial: an id of the other regime (its dir path has no
    regime: the same path in this dir is another trial), or a dir outside OUTPUT_DIR's runs/."""
    key = layout.parse_trial_id(trial)
    regime_given = key is not None
    if key is None and trial.count("/") == 2:
        key = layout.parse_trial_id(f"gated/{trial}")
    if key is not None:
        found = layout.trial_dir(output_dir, key.configuration, key.task, key.seed)
    else:
        found = Path(trial) if Path(trial).is_absolute() else Path.cwd() / trial
    if not (found / layout.STATUS).is_file() and not (found / layout.SPEC).is_file():
        raise UserError(
            f"--trial {trial}: no such trial in {output_dir} (give its id, e.g. gated/aide/iris-species/seed34, "
            "or its directory)"
        )
    if key is None and (output_dir / layout.RUNS).resolve() not in found.resolve().parents:
        raise UserError(
            f"--trial {trial}: not a trial dir of {output_dir} (it is not under its {layout.RUNS}/)"
        )
    recorded = _recorded_id(found)
    if regime_given and recorded is not None and recorded != trial:
        raise UserError(
            f"--trial {trial}: {output_dir} has {recorded} there, not it (a sweep of the other regime?)"
        )
    return found


def _recorded_id(trial_dir: Path) -> str | None:
    """The trial id its status.json (else spec.json) records; None when neither says."""
    for name in (layout.STATUS, layout.SPEC):
        try:
            data = json.loads(read_regular(trial_dir / name))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and isinstance(data.get("trial_id"), str):
            return str(data["trial_id"])
    return None


def read_trial_tail(output_dir: Path, trial_dir: Path, lines: int) -> TrialTail:
    status: TrialStatus | None = None
    problem = ""
    files = layout.TrialFiles(trial_dir)
    found = load_record(files.status, TrialStatus)
    if isinstance(found, Unreadable):
        problem = found.reason
    else:
        status = found
    paths = [files.launcher_log, files.agent_log]
    if status is not None and status.slurm_job_id:
        slurm = layout.OutputFiles(output_dir).slurm
        paths.append(slurm / f"{status.slurm_job_id}_0_log.out")  # submitit's, per task
    logs = tuple(LogTail(path, got) for path in paths if (got := tail_lines(path, lines)) is not None)
    return TrialTail(trial_dir, status, problem, agent_alive(trial_dir), logs)
