"""Which launch ran each trial: launch.json's history of launches (id, date, code) joined with the
trials' status.json `launches`, as the trial page's fact and report.md's trials per launch.

Reads an output dir's launch.json (the trial page); writes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from mle_world import layout
from mle_world.records import LaunchProvenance, LaunchRecord
from mle_world.storage import Unreadable, load_record


def history_of(record: LaunchRecord) -> tuple[LaunchProvenance, ...]:
    """Every real launch launch.json knows, oldest first (the latest is the record's own)."""
    return (*record.earlier_launches, record.provenance())


def read_history(output_dir: Path) -> tuple[LaunchProvenance, ...]:
    """launch.json's history of an output dir; empty when it is missing or unreadable."""
    record = load_record(layout.OutputFiles(output_dir).launch, LaunchRecord)
    return () if isinstance(record, Unreadable) else history_of(record)


def _code(p: LaunchProvenance) -> str:
    code = p.git_sha[:12] if p.git_sha else f"package {(p.package_sha256 or '?')[:12]}"
    return code + (" with uncommitted changes" if p.git_dirty else "")


def describe(launch_id: str, history: Sequence[LaunchProvenance]) -> str:
    """`a1b2c3d4 (launch 2 of 3, 2026-12-01 04:45 UTC, code 0123456789ab)`; the id alone when launch.json
    does not list it."""
    for n, p in enumerate(history, start=1):
        if p.launch_id == launch_id:
            when = f"{p.created_at:%Y-%m-%d %H:%M} UTC"
            return f"{launch_id} (launch {n} of {len(history)}, {when}, code {_code(p)})"
    return f"{launch_id} (not in launch.json)"


def trial_launch_fact(trial_dir: Path, launches: Sequence[str]) -> str | None:
    """The trial page's `launch`: the launch that ran its latest attempt, and the earlier ones it
    resumed from (status.json `launches`); None for a trial from before launches were recorded."""
    if not launches:
        return None
    history = read_history(trial_dir.parents[2]) if len(trial_dir.parents) > 2 else ()
    text = describe(launches[-1], history)
    earlier = [launch for launch in dict.fromkeys(launches[:-1]) if launch != launches[-1]]
    return text + (f"; resumed from {', '.join(earlier)}" if earlier else "")


def trials_per_launch(
    directory: Path, history: Sequence[LaunchProvenance], trials: Iterable[Sequence[str]]
) -> str | None:
    """One plain line for report.md (which escapes it): per launch of the dir, the trials whose latest attempt it ran (each
    trial's `launches`), how many of those resumed from an earlier launch, and the trials without a
    recorded launch. None when no trial records one."""
    counts: dict[str, int] = {}
    resumed: dict[str, int] = {}
    unknown = 0
    for launches in trials:
        if not launches:
            unknown += 1
            continue
        counts[launches[-1]] = counts.get(launches[-1], 0) + 1
        if len(set(launches)) > 1:
            resumed[launches[-1]] = resumed.get(launches[-1], 0) + 1
    if not counts:
        return None
    known = [p.launch_id for p in history if p.launch_id in counts]
    parts = []
    for launch in known + sorted(set(counts) - set(known)):
        again = f", {resumed[launch]} resumed from an earlier launch" if launch in resumed else ""
        parts.append(f"{describe(launch, history)}: {counts[launch]} trial(s){again}")
    if unknown:
        parts.append(
            f"{unknown} trial(s) without a recorded launch (not started, or from before launches had ids)"
        )
    return f"{directory}: " + "; ".join(parts)
