"""`run_paper.py status [--watch|--json|--trial ID] OUTPUT_DIR` on the terminal: the sweep's bounded
summary drawn with rich, once or redrawn in place, or printed as JSON; or one trial and its logs' tails.

Reads the output dir through `sweep_state` and `sweep_summary`; writes only to the console.
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from mle_world import layout
from mle_world.collector import collector_paused
from mle_world.errors import UserError
from mle_world.escapes import printable_line
from mle_world.launch.next_command import launch_problem
from mle_world.launch.state import STATES, utcnow
from mle_world.launch.sweep_state import SweepStatus, read_sweep_status
from mle_world.launch.sweep_summary import Spend, SweepSummary, summarise
from mle_world.launch.trial_tail import find_trial_dir, read_trial_tail


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


MAX_CAUSES = 10
"""Failure causes shown on the terminal (`--json` has every one)."""


def _hours(hours: float) -> str:
    return f"{hours:,.1f}"


def status_view(
    output_dir: Path, sweep: SweepStatus, now: datetime, *, strict: bool = True, costs: bool = False
) -> StatusView:
    """The bounded view of a sweep (`sweep_summary.summarise`) as rich renderables: a few dozen lines
    whatever its size. Raises UserError for an unreadable status.json under `strict`; otherwise shows it
    as a warning (a live view keeps going while a file is being replaced)."""
    if not sweep.trials and not sweep.unreadable:
        lines = [Text(printable_line(f"{output_dir}: no trials launched yet"))]
        problem = launch_problem(output_dir)
        if problem is not None:
            lines.append(Text(printable_line(f"warning: {problem}"), style="yellow"))
        return StatusView(tuple(lines), 0, False)
    if sweep.unreadable and strict:
        # Counting them as finished (or dropping them) would misreport the sweep: refuse instead.
        path, problem = sweep.unreadable[0]
        more = f" (and {len(sweep.unreadable) - 1} more)" if len(sweep.unreadable) > 1 else ""
        raise UserError(f"{path}: corrupt trial status: {problem}{more}")
    summary = summarise(output_dir, sweep, now, costs=costs)
    return StatusView(tuple(render_summary(summary)), summary.counts["failed"], summary.finished)


def _status_command(output_dir: str, *flags: str) -> str:
    return shlex.join(["python", "run_paper.py", "status", output_dir, *flags])


def render_summary(s: SweepSummary) -> list[RenderableType]:
    """Every untrusted string (causes, hosts, holder lines, paths) goes through printable_line into a
    Text: data, never markup."""
    out: list[RenderableType] = []
    if s.launcher_alive:
        who = f"launcher: {s.launcher or 'running'} (holds .launcher.lock)"
    else:
        who = "launcher: none running"
    table = Table(title=Text(printable_line(f"{s.output_dir} — {s.trials} trials")))
    table.add_column("configuration")
    for state in STATES:
        table.add_column(state, justify="right")
    for name, counts in s.per_configuration.items():
        table.add_row(Text(printable_line(name)), *(str(counts[state] or "") for state in STATES))
    table.add_row("[bold]total", *(f"[bold]{s.counts[state]}" for state in STATES))
    out.append(table)
    out.append(Text(printable_line(who)))
    if s.slurm_unreachable is not None:
        line = (
            f"Slurm unreachable: {s.slurm_unreachable}: the counts above are the trials' own status files; "
            "Slurm's pending reasons and ended jobs are unknown"
        )
        out.append(Text(printable_line(line), style="yellow"))

    if s.running:
        shown = len(s.running_longest)
        title = "running — launcher gone, not progressing" if s.orphaned else "running"
        if s.running > shown:
            title += f": the {shown} longest of {s.running}"
        rt = Table(title=title)
        for col in ("trial", "host", "gpu", "elapsed", "slurm job", "attempt", "requeues", "preemptions"):
            rt.add_column(col)
        for t in s.running_longest:
            rt.add_row(
                Text(printable_line(t.trial_id)),
                Text(printable_line(t.host or "")),
                Text(printable_line(t.gpu or "")),
                _duration(t.elapsed_s),
                Text(printable_line(t.slurm_job_id or "")),
                str(t.attempt),
                str(t.requeues),
                str(t.preemptions),
            )
        out.append(rt)
    if s.failures:
        failed = s.counts["failed"]
        title = f"failed: {failed} (infra {s.failed_infra}, agent {s.failed_agent}) by cause"
        ft = Table(title=title)
        for col in ("trials", "class", "cause (first trial's)", "e.g."):
            ft.add_column(col, justify="right" if col == "trials" else "left")
        for group in s.failures[:MAX_CAUSES]:
            ft.add_row(
                str(group.trials),
                Text(printable_line(group.failure_class or "")),
                # The cause quotes agent and server errors: a hostile reply's escape sequences and lines.
                Text(printable_line(group.cause)),
                Text("\n".join(printable_line(trial) for trial in group.examples)),
            )
        out.append(ft)
        first = s.failures[0].examples[0]
        out.append(
            Text(
                printable_line(
                    f"one trial's state and logs: {_status_command(s.output_dir, '--trial', first)}"
                )
            )
        )
        if len(s.failures) > MAX_CAUSES:
            rest = s.failures[MAX_CAUSES:]
            out.append(
                Text(
                    f"… and {len(rest)} more cause(s) of {sum(g.trials for g in rest)} trial(s): "
                    "`status --json` lists every failed trial"
                )
            )
    if s.pending_in_slurm:
        why = ", ".join(f"{reason} {n}" for reason, n in s.pending_in_slurm.items())
        out.append(
            Text(printable_line(f"pending in Slurm: {sum(s.pending_in_slurm.values())} task(s): {why}"))
        )
        from mle_world.launch.slurm.queries import PENDING_HINTS

        out.extend(
            Text(printable_line(f"  {r}: {PENDING_HINTS[r]}"))
            for r in s.pending_in_slurm
            if r in PENDING_HINTS
        )
    out.append(Text(f"time used: {_hours(s.trial_hours)} trial-hours, {_hours(s.gpu_hours)} GPU-hours"))
    if s.spend is not None:
        out.append(_spend_table(s.spend))
    if s.spend_unreadable:
        more = f" (and {len(s.spend_unreadable) - 1} more)" if len(s.spend_unreadable) > 1 else ""
        line = f"left out of the spend: unreadable cost CSV {s.spend_unreadable[0]}{more}"
        out.append(Text(printable_line(line), style="yellow"))
    if s.downtime_trials:
        out.append(
            Text(
                f"endpoint downtime: {s.downtime_trials} finished trial(s) rode out outages, "
                f"{_duration(s.downtime_s)} in total (not counted in their budgets)"
            )
        )
    if s.interrupted_trials:
        out.append(
            Text(
                f"interruptions: {s.requeues} requeue(s) by Slurm, {s.preemptions} preemption(s) "
                f"checkpointed, over {s.interrupted_trials} trial(s)"
            )
        )
    if s.orphaned:
        lock = layout.OutputFiles(Path(s.output_dir)).launcher_lock
        out.append(
            Text(
                printable_line(
                    f"{len(s.orphaned)} trial(s) marked submitted/running, but no launcher holds {lock}: "
                    "the launcher is gone; re-run the same command to resume them"
                ),
                style="yellow",
            )
        )
    if s.ended_jobs:
        jobs = ", ".join(s.ended_jobs[:5])
        more = f", … ({len(s.ended_jobs)} in all)" if len(s.ended_jobs) > 5 else ""
        out.append(
            Text(
                printable_line(
                    f"{len(s.ended_jobs)} trial(s) marked submitted/running, but Slurm says their jobs "
                    f"ended ({jobs}{more}) and no launcher is watching: re-run the same command to record "
                    "them (failed/infra), with --retry-failed to rerun them too"
                ),
                style="yellow",
            )
        )
    if s.unreadable:
        more = f" (and {len(s.unreadable) - 1} more)" if len(s.unreadable) > 1 else ""
        out.append(Text(printable_line(f"unreadable trial status: {s.unreadable[0]}{more}"), style="yellow"))
    left = sum(s.counts[state] for state in ("pending", "submitted", "running"))
    finished = s.counts["succeeded"] + s.counts["failed"]
    if s.orphaned:
        out.append(Text("ETA: unknown (no launcher is running)"))
    elif left and left == s.stuck:
        out.append(Text("ETA: none: every unfinished trial waits for the command below"))
    elif left == 0 and s.unreadable:
        out.append(Text("every trial read has finished"))
    elif left == 0:
        out.append(Text("all trials finished"))
    elif s.eta_s is None:
        why = "no trial finished yet" if finished == 0 else "no trial is running now"
        out.append(Text(f"ETA: unknown ({why})"))
    else:
        out.append(
            Text(
                f"ETA: ~{_duration(s.eta_s)} for {left} trial(s) at the current parallelism "
                f"({s.parallelism}), from {finished} finished trial(s)' times"
            )
        )
    if s.launch_problem is not None:
        out.append(Text(printable_line(f"warning: {s.launch_problem}: no next command"), style="yellow"))
    for line in s.next_commands:
        out.append(Text(printable_line(f"next: {line}"), style="bold"))
    return out


def _spend_table(spend: tuple[Spend, ...]) -> RenderableType:
    if not spend:
        return Text("spend so far: no cost CSV yet (each trial's is written when it ends)")
    table = Table(title=f"spend so far: the cost CSVs of {max(r.trials for r in spend)} finished trial(s)")
    for col in ("role", "trials", "prompt tokens", "completion tokens", "GPU-hours", "cost"):
        table.add_column(col, justify="left" if col == "role" else "right")

    def num(value: float | None, fmt: str) -> str:
        return "" if value is None else format(value, fmt)

    for r in spend:
        cost = (
            f"${r.cost_usd:,.2f}" if r.cost_usd is not None else f"unknown ({r.trials_cost_unknown} trials)"
        )
        table.add_row(
            Text(printable_line(r.role)), str(r.trials), num(r.prompt_tokens, ","),
            num(r.completion_tokens, ","), num(r.gpu_hours, ",.1f"), cost,
        )  # fmt: skip
    known = [r.cost_usd for r in spend]
    total = f"${sum(c for c in known if c is not None):,.2f}" + ("" if None not in known else " + unknown")
    table.add_row("[bold]total", "", "", "", "", f"[bold]{total}")
    return table


def show_status(output_dir: Path, console: Console, *, as_json: bool = False, costs: bool = False) -> int:
    """Print the sweep's state (or, `as_json`, its `SweepSummary`); exit 1 when some trial failed, else 0.
    `costs` adds the spend so far (reads every cost CSV)."""
    with collector_paused():  # a record per trial, none in a cycle: see collector_paused
        sweep = read_sweep_status(output_dir)
        if as_json:
            summary = summarise(output_dir, sweep, utcnow(), costs=costs)
            # ensure_ascii: every control and non-ASCII character of a cause is an escape, inert on a terminal.
            print(json.dumps(summary.model_dump(mode="json"), indent=2, ensure_ascii=True))
            if summary.unreadable:  # as the table refuses them (exit 2): counts without them misreport
                return 2
            return 1 if summary.counts["failed"] else 0
        view = status_view(output_dir, sweep, utcnow(), costs=costs)
    for renderable in view.renderables:
        # soft_wrap: a line (a command to copy, a path) stays one line in a log or a pipe.
        console.print(renderable, soft_wrap=isinstance(renderable, Text))
    return 1 if view.failed else 0


def watch_status(
    output_dir: Path,
    console: Console,
    interval_s: float = 5.0,
    sleep: Callable[[float], None] = time.sleep,
    *,
    costs: bool = False,
) -> int:
    """Redraw the status every `interval_s` in place until every trial finished (or Ctrl-C).

    Returns what `show_status` would return for the last state seen.
    """
    read_sweep_status(output_dir)  # a bad output dir is a user error before the screen is taken over

    def frame() -> tuple[Group, StatusView]:
        now = utcnow()
        with collector_paused():
            view = status_view(output_dir, read_sweep_status(output_dir), now, strict=False, costs=costs)
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


def show_trial(output_dir: Path, trial: str, lines: int, console: Console) -> int:
    """One trial: its state, cause and the last `lines` lines of its logs; exit 1 when it failed."""
    tail = read_trial_tail(output_dir, find_trial_dir(output_dir, trial), lines)

    def say(text: str, style: str | None = None) -> None:
        # Causes and log lines are the agent's, the servers' and the generated code's words: inert.
        console.print(Text(printable_line(text), style=style or ""), soft_wrap=True)

    s = tail.status
    say(f"{s.trial_id if s else trial} ({tail.trial_dir})", "bold")
    if s is None:
        say(f"status.json: unreadable ({tail.problem})", "yellow")
    else:
        parts = [f"state {s.state}" + (f" ({s.failure_class})" if s.failure_class else "")]
        parts.append(f"attempt {s.attempt}, requeues {s.requeues}, preemptions {s.preemptions}")
        if s.slurm_job_id:
            parts.append(f"slurm job {s.slurm_job_id}")
        if s.host:
            parts.append(f"host {s.host}" + (f" gpu {s.gpu}" if s.gpu else ""))
        for name, when in (("started", s.started_at), ("ended", s.ended_at)):
            if when:
                parts.append(f"{name} {when:%Y-%m-%d %H:%M:%S} UTC")
        if s.wall_used_s:
            parts.append(f"wall used {_duration(s.wall_used_s)}")
        say(", ".join(parts))
        if s.cause:
            say(f"cause: {s.cause}")
    say("agent: " + ("alive (holds .journal.lock)" if tail.agent_alive else "not running"))
    for log in tail.logs:
        say(f"── {log.path} (last {len(log.lines)} line(s)) ──", "dim")
        for line in log.lines:
            say(line)
    if not tail.logs:
        say("no logs yet")
    return 1 if s is not None and s.state == "failed" else 0
