"""What a hard-killed local launcher leaves running: its trials' command sessions, found and stopped, and
its trials released for a re-run.

Reads /proc (every process's stat and the boot time) and probes a trial's `.journal.lock`; signals the
processes of a trial's session on this host; writes a released trial's status.json (`release_orphan`).
"""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from mle_world.launch.liveness import agent_alive
from mle_world.launch.state import release_orphan
from mle_world.plan.sweep_plan import TrialCommand
from mle_world.records import TrialStatus

START_SLACK_S = 2.0
"""A process counts as the run's when it started at most this long before the run's `started_at`
(the status is written just before the command starts; clock ticks round)."""
LEADER_WITHIN_S = 60.0
"""The session's leader (the supervisor's `bash -c`, or what it exec'd) started at most this long after
`started_at`; a leader started later is a recycled pid that leads another, newer session."""


@dataclass(frozen=True)
class LeftoverRun:
    """One trial's command session that outlived its launcher (SIGKILL, OOM killer, lost terminal)."""

    trial_id: str
    session: int
    """The command's session id: the supervisor's `bash -c` pid (status.json `pid`), start_new_session."""
    pids: tuple[int, ...]


def _boot_time(proc: str) -> float:
    with open(f"{proc}/stat", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("btime "):
                return float(line.split()[1])
    raise OSError(f"{proc}/stat: no btime")


def _session_and_start(text: str) -> tuple[int, int]:
    """(session id, start time in clock ticks since boot) from /proc/<pid>/stat; the command may hold ')'."""
    rest = text[text.rindex(")") + 2 :].split()
    # After the command: state(0) ppid(1) pgrp(2) session(3) ... starttime is field 22 of the line (19 here).
    return int(rest[3]), int(rest[19])


def session_members(session: int, since: datetime, proc: str = "/proc") -> tuple[int, ...]:
    """Processes of the session a run started at `since` as the leader `session`: none when `session`
    now leads a session started outside [since - START_SLACK_S, since + LEADER_WITHIN_S] (a recycled
    pid); members of an older session never count. A leader that is gone cannot have been recycled:
    Linux keeps a pid that is still some process's session id."""
    try:
        boot = _boot_time(proc)
        entries = list(os.scandir(proc))
    except OSError:
        return ()
    ticks = os.sysconf("SC_CLK_TCK")
    floor = since.timestamp() - START_SLACK_S
    found: list[int] = []
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            with open(f"{proc}/{entry.name}/stat", encoding="utf-8", errors="replace") as handle:
                sid, start = _session_and_start(handle.read())
        except (OSError, ValueError, IndexError):
            continue
        started = boot + start / ticks
        if int(entry.name) == session and sid == session and started > since.timestamp() + LEADER_WITHIN_S:
            return ()  # the pid leads a session begun long after the run: not the run's
        if sid == session and started >= floor:
            found.append(int(entry.name))
    return tuple(sorted(found))


def find_leftover(
    trial_id: str, pid: int | None, host: str | None, started_at: datetime | None, here: str
) -> LeftoverRun | None:
    """The run status.json records as running (`pid`, `host`, `started_at`), if its session is still
    alive on this host `here`; None when it is gone, or ran elsewhere (then see `agent_alive`)."""
    if pid is None or started_at is None or host != here:
        return None
    pids = session_members(pid, started_at)
    return LeftoverRun(trial_id, pid, pids) if pids else None


def _signal(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def stop_leftovers(runs: Iterable[LeftoverRun], grace_s: float, poll_s: float = 0.1) -> None:
    """SIGTERM every process of the runs' sessions (the agent checkpoints and exits 143; its
    wrappers ignore SIGTERM and end with it), SIGKILL what is left after `grace_s`; returns once
    the sessions are empty."""
    runs = list(runs)
    pids = {p for run in runs for p in run.pids}
    _signal(pids, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while True:
        alive = {p for p in pids if _alive(p)}
        if not alive:
            return
        if time.monotonic() >= deadline:
            break
        time.sleep(poll_s)
    _signal(alive, signal.SIGKILL)
    while any(_alive(p) for p in alive):
        time.sleep(poll_s)


def _alive(pid: int) -> bool:
    """Running (a zombie has ended: its parent, gone with the launcher, was init's to reap)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return False
    return text[text.rindex(")") + 2 :].split()[0] != "Z"


def release_orphans(
    stale: Sequence[tuple[TrialCommand, TrialStatus]], say: Callable[[str], None], *, grace_s: float
) -> list[TrialCommand]:
    """Local trials left submitted/running by a launcher that is gone (the caller holds the lock):
    a command it started that still runs on this host is stopped first (SIGTERM: the agent
    checkpoints, SIGKILL after `grace_s`), so a trial never runs twice at once nor two trials on one
    GPU; a trial whose agent still lives elsewhere is left alone. Returns the trials put back to
    pending."""
    here = socket.gethostname()
    leftovers = [
        run
        for cmd, status in stale
        if (run := find_leftover(cmd.trial.trial_id, status.pid, status.host, status.started_at, here))
    ]
    if leftovers:
        names = ", ".join(run.trial_id for run in leftovers)
        say(
            f"[launch] stopping {len(leftovers)} trial(s) still running from a launcher that is gone: {names}"
        )
        stop_leftovers(leftovers, grace_s=grace_s)
    released: list[TrialCommand] = []
    for cmd, status in stale:
        if agent_alive(cmd.trial.trial_dir):
            say(
                f"[launch] {cmd.trial.trial_id}: its agent still runs (pid {status.pid} on {status.host}) "
                "although its launcher is gone; not restarted: stop it or let it end, then re-run"
            )
            continue
        release_orphan(cmd.trial.trial_dir, cmd.trial.trial_id)
        released.append(cmd)
    return released
