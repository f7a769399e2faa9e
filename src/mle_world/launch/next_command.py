"""The exact next step of a sweep, as `status` and a finished launch say it: the sweep's own command
(launch.json's argv) with the `--retry-failed` it needs, or the audit; and why launch.json gives none.

Reads the output dir's launch.json and a `SweepStatus`; writes nothing.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from mle_world import layout
from mle_world.identity import ALLOW_PROVENANCE_FLAG
from mle_world.launch.sweep_state import SweepStatus
from mle_world.storage import read_regular


@dataclass(frozen=True)
class LaunchArgv:
    """launch.json's argv (the sweep's latest real launch), or None and why not (`problem` None when there
    is no launch.json: a dir the launcher's identity file alone marks)."""

    argv: list[str] | None
    problem: str | None


class _LaunchArgv(BaseModel):
    """launch.json's argv alone: pydantic's parser checks the whole file is JSON, and makes no object of
    the rest (a trial list of 13 MB at 100,000 trials: json.loads built ~100 MB of dicts for one list)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    argv: Any = None


def read_launch_argv(output_dir: Path) -> LaunchArgv:
    """launch.json's argv, read once for a view; a FIFO there is refused, not waited on."""
    path = output_dir / layout.LAUNCH
    try:
        data = read_regular(path)
    except FileNotFoundError:
        return LaunchArgv(None, None)
    except OSError as exc:
        return LaunchArgv(None, f"{path}: unreadable ({exc.strerror or exc})")
    try:
        argv = _LaunchArgv.model_validate_json(data).argv
    except ValidationError as exc:
        if any(error["type"] == "json_invalid" for error in exc.errors()):
            return LaunchArgv(None, f"{path}: not JSON (corrupt?)")
        argv = None  # JSON, but not an object
    if not (isinstance(argv, list) and argv):
        return LaunchArgv(None, f"{path}: records no launch command (argv)")
    return LaunchArgv([str(a) for a in argv], None)


def launch_problem(output_dir: Path) -> str | None:
    """Why the output dir's launch.json gives no command to run next (None when it does, or has none)."""
    return read_launch_argv(output_dir).problem


def _without_retry(argv: list[str]) -> list[str]:
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            if arg in ("infra", "all"):
                continue
        if arg == "--retry-failed":
            skip = True
            continue
        if arg.startswith("--retry-failed=") or arg == ALLOW_PROVENANCE_FLAG:
            continue  # an override is for the launch it was given to: a later change must be seen again
        out.append(arg)
    return out


def _command(output_dir: Path, argv: list[str], *extra: str) -> str:
    return shlex.join(["python", "run_paper.py", *_without_retry(argv), *extra])


def rerun_command(output_dir: Path) -> str | None:
    """The sweep's own command with --retry-failed (and where to run it), None without launch.json."""
    argv = read_launch_argv(output_dir).argv
    if argv is None:
        return None
    return f"{_command(output_dir, argv, '--retry-failed')}{_cwd_note(output_dir, argv)}"


def _cwd_note(output_dir: Path, argv: list[str]) -> str:
    """A relative --output-dir in the argv is the sweep only from the directory it was launched in."""
    for i, arg in enumerate(argv):
        value = argv[i + 1] if arg == "--output-dir" and i + 1 < len(argv) else None
        value = arg.split("=", 1)[1] if arg.startswith("--output-dir=") else value
        if value is not None and not Path(value).is_absolute():
            if Path(value).absolute() != output_dir.absolute():
                return f" (from the directory the sweep was launched in: --output-dir {value} is relative)"
            return ""
    return ""


def next_commands(
    output_dir: Path, sweep: SweepStatus, infra: int, agent: int, launch: LaunchArgv | None = None
) -> tuple[str, ...]:
    """The exact next step: the sweep's own command (from launch.json, or `launch` read from it already)
    with --retry-failed when trials failed, bare when a gone launcher or ended jobs left trials
    unrecorded; the audit when all is done."""
    active = sum(1 for t in sweep.trials if t.state in ("pending", "submitted", "running"))
    argv = (launch or read_launch_argv(output_dir)).argv
    lines: list[str] = []
    if argv is None:
        if infra or agent or sweep.stuck():
            lines.append("re-run the sweep's own command (launch.json is unreadable) with --retry-failed")
        return tuple(lines)
    note = _cwd_note(output_dir, argv)
    unrecorded = len(sweep.orphaned()) + len(sweep.ended_jobs)
    unstarted = len(sweep.unstarted())
    if infra or unrecorded or unstarted:
        what = [f"{infra} infra failure(s)"] * bool(infra)
        what += [f"{unrecorded} trial(s) no launcher will record"] * bool(unrecorded)
        what += [f"{unstarted} pending trial(s) no launcher will start"] * bool(unstarted)
        when = " once the running launcher has finished" if sweep.launcher_alive else ""
        command = _command(output_dir, argv, "--retry-failed")
        lines.append(f"rerun {' and '.join(what)}{when}{note}: {command}")
    if agent:
        lines.append(
            f"also rerun the {agent} agent failure(s){note}: {_command(output_dir, argv, '--retry-failed', 'all')}"
        )
    if infra or agent:
        lines.append(
            "each failed trial reruns while attempt + requeues < cluster.launch.max_attempts; "
            "the agent resumes from its journal"
        )
    if not lines and active == 0 and not sweep.unreadable:  # an unreadable trial may be unfinished
        lines.append(f"audit it: {shlex.join(['python', 'run_paper.py', 'audit', str(output_dir)])}")
    return tuple(lines)
