"""A trial's budget timeline: LLM calls, executions and endpoint outages, and the budget totals.

Reads parsed events.jsonl lines and result.json data; writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mle_world.trial_events import TrialEvents


@dataclass(frozen=True)
class Span:
    """One bar of the budget timeline: seconds since the trial's first event."""

    lane: str
    start: float
    end: float
    label: str
    kind: str
    """llm-ok, llm-error, exec-debug, exec-full, exec-timeout or downtime."""


@dataclass(frozen=True)
class Timeline:
    """Bars per lane plus the budget totals from result.json."""

    lanes: tuple[str, ...]
    spans: tuple[Span, ...]
    horizon_s: float
    totals: tuple[tuple[str, float], ...]
    """(label, seconds) from result.json: LLM, execution, the rest of the time used, and endpoint
    downtime (excluded from the time used: the budget clock pauses while a role is down)."""


def budget_timeline(events: TrialEvents, result: Mapping[str, Any] | None) -> Timeline | None:
    """LLM calls per role, executions and outages on one clock, plus the budget totals of result.json."""
    starts: list[tuple[float, float, Span]] = []
    for call in events.llm:
        end = call.ts.timestamp()
        kind = "llm-ok" if call.outcome == "ok" else "llm-error"
        label = f"{call.role} {call.purpose} {call.latency_s:.1f}s {call.outcome}"
        starts.append((end - call.latency_s, end, Span(f"LLM {call.role}", 0, 0, label, kind)))
    for outage in events.downtime:
        if outage.phase == "down" or outage.downtime_s is None:
            continue  # the "up"/"ended" line carries the outage's length
        end = outage.ts.timestamp()
        label = f"{outage.role} down {outage.downtime_s:.1f}s ({outage.phase}){': ' + outage.cause if outage.cause else ''}"
        starts.append((end - outage.downtime_s, end, Span("downtime", 0, 0, label, "downtime")))
    for run in events.executions:
        end = run.ts.timestamp()
        kind = "exec-timeout" if run.timed_out else f"exec-{run.kind}"
        label = f"{run.kind} run of {run.node_id[:8]} {run.exec_time_s:.1f}s exit {run.exit_code}"
        starts.append((end - run.exec_time_s, end, Span("execution", 0, 0, label, kind)))
    totals: list[tuple[str, float]] = []
    if result:
        used = float(result.get("time_used_s") or 0.0)
        accounted = 0.0
        for label, key in (("LLM", "llm_time_s"), ("execution", "exec_time_s")):
            value = result.get(key)
            if isinstance(value, int | float):
                totals.append((label, float(value)))
                accounted += float(value)
        if used:
            totals.append(("other", max(0.0, used - accounted)))
        downtime = result.get("downtime_s")
        if isinstance(downtime, int | float) and downtime > 0:
            totals.append(("downtime (not budgeted)", float(downtime)))
    if not starts and not totals:
        return None
    origin = min((s for s, _, _ in starts), default=0.0)
    spans = [Span(span.lane, s - origin, e - origin, span.label, span.kind) for s, e, span in starts]
    order = {"execution": 0, "downtime": 2}
    lanes = tuple(sorted({s.lane for s in spans}, key=lambda lane: (order.get(lane, 1), lane)))
    horizon = max((s.end for s in spans), default=0.0)
    return Timeline(lanes, tuple(spans), horizon, tuple(totals))
