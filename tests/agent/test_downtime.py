"""Downtime bookkeeping: overlapping outages of two roles pause the budget once; the launcher's reading.

Reads nothing but what the tests write under tmp_path; a manual clock makes the arithmetic exact.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from mle_world.agent.budget import Budget
from mle_world.agent.events import EventLog, MemorySink
from mle_world.agent.llm.downtime import Downtime
from mle_world.launch.trial import recorded_downtime_s
from mle_world.records import BudgetSettings, DowntimeEvent


class ManualClock:
    def __init__(self) -> None:
        self.t = 100.0

    def now(self) -> float:
        return self.t


def test_overlapping_outages_pause_the_budget_once() -> None:
    clock, sink = ManualClock(), MemorySink()
    downtime = Downtime(clock, sink)
    budget = Budget(BudgetSettings(time_limit_s=60), clock, paused=downtime.paused_s)
    clock.t += 5
    downtime.down("coder", "refused")  # 105
    clock.t += 10
    downtime.down("feedback", "500")  # 115: both down, still one pause
    downtime.down("coder", "again")  # already down: ignored
    clock.t += 4
    assert budget.used() == pytest.approx(5)  # the clock stood still since 105
    downtime.up("coder")  # 119
    clock.t += 6
    downtime.up("feedback")  # 125
    clock.t += 2
    assert downtime.paused_s() == pytest.approx(20)
    assert budget.used() == pytest.approx(7) and budget.left() == pytest.approx(53)
    phases = [(e.role, e.phase, e.downtime_s) for e in sink.events if isinstance(e, DowntimeEvent)]
    assert phases == [
        ("coder", "down", None),
        ("feedback", "down", None),
        ("coder", "up", 14.0),
        ("feedback", "up", 10.0),
    ]


def test_a_session_ending_mid_outage_closes_it() -> None:
    clock, sink = ManualClock(), MemorySink()
    downtime = Downtime(clock, sink)
    downtime.down("world", "hung")
    clock.t += 3
    downtime.end("preempted")
    clock.t += 50
    assert downtime.paused_s() == pytest.approx(3)
    last = sink.events[-1]
    assert isinstance(last, DowntimeEvent) and (last.phase, last.downtime_s, last.cause) == (
        "ended",
        3,
        "preempted",
    )


def test_the_launcher_reads_closed_and_open_outages(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events.jsonl")
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for role, phase, at, seconds in (
        ("coder", "down", 0, None),
        ("coder", "up", 30, 30.0),  # an earlier session's closed outage
        ("feedback", "down", 40, None),  # still open
    ):
        log.emit(DowntimeEvent(ts=start + timedelta(seconds=at), role=role, phase=phase, downtime_s=seconds))  # type: ignore[arg-type]
    assert recorded_downtime_s(tmp_path, now=start + timedelta(seconds=52)) == pytest.approx(30 + 12)
    assert recorded_downtime_s(tmp_path / "missing") == 0.0
