"""`run_paper.py status OUTPUT_DIR`: counts per state and configuration, running trials, failures, ETA.

Reads every `runs/*/*/status.json` under the output dir (the sweep's only source of truth); writes nothing.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from mle_world.errors import UserError
from mle_world.launch.state import STATES, utcnow
from mle_world.records import TrialStatus


@dataclass(frozen=True)
class SweepStatus:
    trials: tuple[TrialStatus, ...]
    unreadable: tuple[Path, ...]

    def counts(self) -> Counter[str]:
        return Counter(t.state for t in self.trials)

    def eta_s(self, parallelism: int | None = None, now: datetime | None = None) -> float | None:
        """Remaining trials × mean duration of finished ones ÷ observed parallelism."""
        now = now or utcnow()
        durations = [
            (t.ended_at - t.started_at).total_seconds() + t.wall_used_s
            for t in self.trials
            if t.state == "succeeded" and t.started_at and t.ended_at
        ]
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


def collect(output_dir: Path) -> SweepStatus:
    if not output_dir.is_dir():
        raise UserError(f"{output_dir}: no such output dir")
    trials: list[TrialStatus] = []
    bad: list[Path] = []
    for path in sorted(output_dir.glob("runs/*/*/status.json")):
        try:
            trials.append(TrialStatus.model_validate_json(path.read_text(encoding="utf-8")))
        except (OSError, ValidationError, ValueError):
            bad.append(path)
    return SweepStatus(tuple(trials), tuple(bad))


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


def show_status(output_dir: Path, console: Console) -> int:
    """Print the sweep's state; exit 0 when every trial succeeded, 1 when some failed, else 0."""
    sweep = collect(output_dir)
    if not sweep.trials:
        console.print(f"{output_dir}: no trials launched yet")
        return 0
    now = utcnow()
    per_config: dict[str, Counter[str]] = defaultdict(Counter)
    for t in sweep.trials:
        per_config[configuration_of(t.trial_id)][t.state] += 1
    table = Table(title=f"{output_dir} — {len(sweep.trials)} trials")
    table.add_column("configuration")
    for state in STATES:
        table.add_column(state, justify="right")
    for name in sorted(per_config):
        table.add_row(name, *(str(per_config[name][s] or "") for s in STATES))
    totals = sweep.counts()
    table.add_row("[bold]total", *(f"[bold]{totals[s]}" for s in STATES))
    console.print(table)

    running = [t for t in sweep.trials if t.state == "running"]
    if running:
        rt = Table(title="running")
        for col in ("trial", "host", "gpu", "elapsed", "slurm job", "attempt"):
            rt.add_column(col)
        for t in running:
            elapsed = (now - t.started_at).total_seconds() + t.wall_used_s if t.started_at else 0.0
            rt.add_row(
                t.trial_id,
                t.host or "",
                t.gpu or "",
                _duration(elapsed),
                t.slurm_job_id or "",
                str(t.attempt),
            )
        console.print(rt)
    failed = [t for t in sweep.trials if t.state == "failed"]
    if failed:
        ft = Table(title="failed")
        for col in ("trial", "class", "attempt", "cause"):
            ft.add_column(col)
        for t in failed:
            ft.add_row(t.trial_id, t.failure_class or "", str(t.attempt), t.cause or "")
        console.print(ft)
    for path in sweep.unreadable:
        console.print(f"[yellow]unreadable status: {path}")
    eta = sweep.eta_s(now=now)
    if eta == 0.0:
        console.print("all trials finished")
    elif eta is None:
        console.print("ETA: unknown (no trial finished yet)")
    else:
        console.print(f"ETA: ~{_duration(eta)} at the current parallelism")
    return 1 if failed else 0
