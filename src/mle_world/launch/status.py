"""`run_paper.py status [--watch] OUTPUT_DIR`: counts per state and configuration, running trials, failures, ETA.

Reads every `runs/*/*/status.json` under the output dir (the sweep's only source of truth); writes nothing.
"""

from __future__ import annotations

import shutil
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from pydantic import ValidationError
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from mle_world import layout
from mle_world.errors import UserError
from mle_world.escapes import printable_line
from mle_world.identity import IDENTITY_FILE
from mle_world.launch.liveness import launcher_alive
from mle_world.launch.state import STATES, utcnow
from mle_world.records import TrialStatus


@dataclass(frozen=True)
class SweepStatus:
    trials: tuple[TrialStatus, ...]
    unreadable: tuple[tuple[Path, str], ...]
    """status.json files that could not be read, with the problem."""
    launcher_alive: bool = True
    """False when no local launcher holds the output dir's lock (its trials cannot be progressing)."""
    ended_jobs: tuple[tuple[str, str], ...] = ()
    pending: tuple[tuple[str, int], ...] = ()
    """Slurm's reasons for the sweep's pending tasks, most tasks first (`pending_in_slurm`)."""
    """(trial id, "12_3 CANCELLED"): Slurm trials still marked submitted/running whose job Slurm says
    ended, with no launcher watching to record it (`ended_slurm_jobs`)."""

    def orphaned(self) -> list[TrialStatus]:
        """Local trials still marked submitted/running although their launcher is gone."""
        if self.launcher_alive:
            return []
        return [t for t in self.trials if t.state in ("submitted", "running") and t.backend == "local"]

    def stuck(self) -> int:
        """Trials marked submitted/running that cannot progress: orphaned local ones, ended Slurm jobs."""
        return len(self.orphaned()) + len(self.ended_jobs)

    def counts(self) -> Counter[str]:
        return Counter(t.state for t in self.trials)

    def eta_s(self, parallelism: int | None = None, now: datetime | None = None) -> float | None:
        """Remaining trials × mean duration of finished ones ÷ observed parallelism."""
        now = now or utcnow()
        durations = [t.wall_used_s for t in self.trials if t.state == "succeeded"]  # all runs, once
        left = sum(1 for t in self.trials if t.state in ("pending", "submitted", "running"))
        if not left:
            return 0.0
        if not durations:
            return None
        running = sum(1 for t in self.trials if t.state == "running")
        width = max(1, parallelism or running or 1)
        mean = sum(durations) / len(durations)
        elapsed_running = [
            (now - t.started_at).total_seconds() for t in self.trials if t.state == "running" and t.started_at
        ]
        # Running trials are partly done: count what is left of them, not a whole trial.
        work = (left - len(elapsed_running)) * mean + sum(max(0.0, mean - e) for e in elapsed_running)
        return work / width


def configuration_of(trial_id: str) -> str:
    parts = trial_id.split("/")
    return parts[1] if len(parts) >= 4 else "?"


OUTPUT_DIR_MARKERS = (layout.LAUNCH, IDENTITY_FILE)
"""Files only a launch writes: the CLI's record, or the launcher's identity of the sweep."""


def is_output_dir(path: Path) -> bool:
    """A directory some launch (dry or real) has written to."""
    return any((path / name).is_file() for name in OUTPUT_DIR_MARKERS)


def ended_slurm_jobs(trials: Sequence[tuple[Path, TrialStatus]]) -> tuple[tuple[str, str], ...]:
    """Slurm trials marked submitted/running whose job Slurm reports ended (CANCELLED, NODE_FAIL,
    TIMEOUT, …) and whose status.json still says so after Slurm answered (a job records its own end
    before it ends). Only a watching launcher records such an end; without one, `status` said
    'running' for ever and `status --watch` never returned. Nothing when squeue/sacct cannot answer."""
    active = [
        (path, t)
        for path, t in trials
        if t.state in ("submitted", "running") and t.backend == "slurm" and t.slurm_job_id
    ]
    if not active or shutil.which("sacct") is None:
        return ()
    # Here, not at the top: the Slurm backend (and the planner it imports) is 0.07 s CPU that
    # `audit` and `status` of a local sweep do not need (they import this module for is_output_dir).
    from mle_world.launch.slurm_queries import ALIVE_STATES, query_states

    view = query_states(sorted({t.slurm_job_id or "" for _, t in active}))
    ended: list[tuple[str, str]] = []
    for path, status in active:
        state = view.states.get(status.slurm_job_id or "")
        if state is None or state in ALIVE_STATES:
            continue
        try:
            now = TrialStatus.model_validate_json(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if now.state in ("submitted", "running") and now.slurm_job_id == status.slurm_job_id:
            ended.append((status.trial_id, f"{status.slurm_job_id} {state}"))
    return tuple(ended)


def pending_in_slurm(trials: Sequence[TrialStatus]) -> tuple[tuple[str, int], ...]:
    """Why Slurm keeps the submitted trials' tasks waiting (Priority, Resources, JobArrayTaskLimit,
    QOSMaxGRESPerUser, ...), from one squeue; nothing when no trial waits or squeue cannot answer."""
    jobs = [
        t.slurm_job_id for t in trials if t.state == "submitted" and t.backend == "slurm" and t.slurm_job_id
    ]
    if not jobs or shutil.which("squeue") is None:
        return ()
    from mle_world.launch.slurm_queries import query_pending_reasons

    reasons = query_pending_reasons(jobs)
    return tuple(reasons.most_common()) if reasons else ()


def read_sweep_status(output_dir: Path) -> SweepStatus:
    """Every trial's status.json under an output dir of run_paper.py (else a UserError)."""
    if not output_dir.is_dir():
        raise UserError(f"{output_dir}: no such output dir")
    if not is_output_dir(output_dir):
        raise UserError(f"{output_dir}: not an output dir of run_paper.py (no launch.json)")
    trials: list[tuple[Path, TrialStatus]] = []
    bad: list[tuple[Path, str]] = []
    for path in layout.status_paths(output_dir):
        try:
            trials.append((path, TrialStatus.model_validate_json(path.read_text(encoding="utf-8"))))
        except OSError as exc:
            bad.append((path, exc.strerror or str(exc)))
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            bad.append((path, f"{where + ': ' if where else ''}{err['msg']}"))
    alive = launcher_alive(output_dir)
    ended = () if alive else ended_slurm_jobs(trials)  # a watching launcher records them itself
    statuses = tuple(t for _, t in trials)
    pending = pending_in_slurm(statuses)
    return SweepStatus(statuses, tuple(bad), launcher_alive=alive, ended_jobs=ended, pending=pending)


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


@dataclass(frozen=True)
class StatusView:
    """What `status` shows of one sweep: rich renderables, and the exit code the state implies."""

    renderables: tuple[RenderableType, ...]
    failed: int
    finished: bool
    """No trial is pending, submitted or running (or none can progress: the launcher is gone)."""


def status_view(output_dir: Path, sweep: SweepStatus, now: datetime, *, strict: bool = True) -> StatusView:
    """Tables per configuration and state, running and failed trials, warnings and the ETA.

    Raises UserError for an unreadable status.json under `strict`; otherwise shows it as a warning
    (a live view keeps going while a file is being replaced).
    """
    out: list[RenderableType] = []
    if not sweep.trials and not sweep.unreadable:
        return StatusView((Text(f"{output_dir}: no trials launched yet"),), 0, False)
    per_config: dict[str, Counter[str]] = defaultdict(Counter)
    for t in sweep.trials:
        per_config[configuration_of(t.trial_id)][t.state] += 1
    table = Table(
        title=Text(printable_line(f"{output_dir} — {len(sweep.trials)} trials"))
    )  # a path, not markup
    table.add_column("configuration")
    for state in STATES:
        table.add_column(state, justify="right")
    for name in sorted(per_config):
        table.add_row(Text(name), *(str(per_config[name][s] or "") for s in STATES))
    totals = sweep.counts()
    table.add_row("[bold]total", *(f"[bold]{totals[s]}" for s in STATES))
    out.append(table)

    running = [t for t in sweep.trials if t.state == "running"]
    if running:
        title = "running — launcher gone, not progressing" if sweep.orphaned() else "running"
        rt = Table(title=title)
        for col in ("trial", "host", "gpu", "elapsed", "slurm job", "attempt", "requeues", "preemptions"):
            rt.add_column(col)
        for t in running:
            elapsed = (now - t.started_at).total_seconds() + t.wall_used_s if t.started_at else 0.0
            rt.add_row(
                Text(t.trial_id),
                Text(printable_line(t.host or "")),
                Text(printable_line(t.gpu or "")),
                _duration(elapsed),
                t.slurm_job_id or "",
                str(t.attempt),
                str(t.requeues),
                str(t.preemptions),
            )
        out.append(rt)
    failed = [t for t in sweep.trials if t.state == "failed"]
    if failed:
        ft = Table(title="failed")
        for col in ("trial", "class", "attempt", "requeues", "cause"):
            ft.add_column(col)
        for t in failed:
            ft.add_row(
                # The cause quotes agent and server errors: a hostile reply's escape sequences and lines.
                Text(t.trial_id),
                Text(printable_line(t.failure_class or "")),
                str(t.attempt),
                str(t.requeues),
                Text(printable_line(t.cause or "")),
            )
        out.append(ft)
    if sweep.pending:
        why = ", ".join(f"{reason} {n}" for reason, n in sweep.pending)
        out.append(Text(f"pending in Slurm: {sum(n for _, n in sweep.pending)} task(s): {why}"))
        from mle_world.launch.slurm_queries import PENDING_HINTS

        out.extend(Text(f"  {r}: {PENDING_HINTS[r]}") for r, _ in sweep.pending if r in PENDING_HINTS)
    rode_out = [t for t in sweep.trials if t.downtime_s > 0]
    if rode_out:
        total = sum(t.downtime_s for t in rode_out)
        longest = max(rode_out, key=lambda t: t.downtime_s)
        out.append(
            Text(
                f"endpoint downtime: {len(rode_out)} finished trial(s) rode out outages, {_duration(total)} "
                f"in total (not counted in their budgets); longest {_duration(longest.downtime_s)} "
                f"in {longest.trial_id}"
            )
        )
    interrupted = [t for t in sweep.trials if t.requeues or t.preemptions]
    if interrupted:
        out.append(
            Text(
                f"interruptions: {sum(t.requeues for t in interrupted)} requeue(s) by Slurm, "
                f"{sum(t.preemptions for t in interrupted)} preemption(s) checkpointed, "
                f"over {len(interrupted)} trial(s)"
            )
        )
    orphaned = sweep.orphaned()
    if orphaned:
        out.append(
            Text(
                f"{len(orphaned)} trial(s) marked submitted/running, but no launcher holds "
                f"{output_dir / '.launcher.lock'}: the launcher is gone; re-run the same command to resume them",
                style="yellow",
            )
        )
    if sweep.ended_jobs:
        jobs = ", ".join(job for _, job in sweep.ended_jobs[:5])
        more = f", … ({len(sweep.ended_jobs)} in all)" if len(sweep.ended_jobs) > 5 else ""
        out.append(
            Text(
                f"{len(sweep.ended_jobs)} trial(s) marked submitted/running, but Slurm says their jobs "
                f"ended ({jobs}{more}) and no launcher is watching: re-run the same command to record "
                "them (failed/infra), with --retry-failed to rerun them too",
                style="yellow",
            )
        )
    if sweep.unreadable:
        # Counting them as finished (or dropping them) would misreport the sweep: refuse instead.
        path, problem = sweep.unreadable[0]
        more = f" (and {len(sweep.unreadable) - 1} more)" if len(sweep.unreadable) > 1 else ""
        if strict:
            raise UserError(f"{path}: corrupt trial status: {problem}{more}")
        out.append(Text(printable_line(f"{path}: unreadable trial status: {problem}{more}"), style="yellow"))
    eta = sweep.eta_s(now=now)
    if orphaned:
        out.append(Text("ETA: unknown (no launcher is running)"))
    elif eta == 0.0:
        out.append(Text("all trials finished"))
    elif eta is None:
        out.append(Text("ETA: unknown (no trial finished yet)"))
    else:
        out.append(Text(f"ETA: ~{_duration(eta)} at the current parallelism"))
    active = sum(1 for t in sweep.trials if t.state in ("pending", "submitted", "running"))
    finished = (eta == 0.0 or bool(orphaned) or active == sweep.stuck()) and not sweep.unreadable
    return StatusView(tuple(out), len(failed), finished)


def show_status(output_dir: Path, console: Console) -> int:
    """Print the sweep's state; exit 0 when every trial succeeded, 1 when some failed, else 0."""
    view = status_view(output_dir, read_sweep_status(output_dir), utcnow())
    for renderable in view.renderables:
        console.print(renderable)
    return 1 if view.failed else 0


def watch_status(
    output_dir: Path,
    console: Console,
    interval_s: float = 5.0,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Redraw the status every `interval_s` in place until every trial finished (or Ctrl-C).

    Returns what `show_status` would return for the last state seen.
    """
    read_sweep_status(output_dir)  # a bad output dir is a user error before the screen is taken over

    def frame() -> tuple[Group, StatusView]:
        now = utcnow()
        view = status_view(output_dir, read_sweep_status(output_dir), now, strict=False)
        footer = Text(f"updated {now:%H:%M:%S} UTC · every {interval_s:g}s · Ctrl-C to leave", style="dim")
        return Group(*view.renderables, footer), view

    group, view = frame()
    with Live(group, console=console, auto_refresh=False, transient=False) as live:
        while not view.finished:
            sleep(interval_s)
            group, view = frame()
            live.update(group, refresh=True)
    if not console.is_terminal:
        console.line()  # Live ends its last frame with a newline only on a terminal
    return 1 if view.failed else 0
