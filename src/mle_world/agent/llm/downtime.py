"""Endpoint downtime of one trial session: the time during which some role had every replica down.

Reads the injected clock; writes one `DowntimeEvent` per outage start and end to the event sink.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Literal

from mle_world.agent.budget import Clock
from mle_world.agent.events import EventSink
from mle_world.records import DowntimeEvent, Role


class Downtime:
    """The union of the roles' outages; the budget subtracts `paused_s()` so an outage costs no budget.

    Thread-safe: concurrent requests of several roles report outages into one object.
    """

    def __init__(self, clock: Clock, events: EventSink) -> None:
        self._clock = clock
        self._events = events
        self._lock = threading.Lock()
        self._down: dict[Role, float] = {}
        self._since = 0.0
        self._total = 0.0

    def down(self, role: Role, cause: str) -> None:
        """Every replica of `role` failed: the budget clock stops (if no other role is down already)."""
        now = self._clock.now()
        with self._lock:
            if role in self._down:
                return
            if not self._down:
                self._since = now
            self._down[role] = now
        self._emit(role, "down", None, cause)

    def up(self, role: Role, phase: Literal["up", "ended"] = "up", cause: str | None = None) -> None:
        """`role` answered again (or the session stops during its outage): its outage is over."""
        now = self._clock.now()
        with self._lock:
            started = self._down.pop(role, None)
            if started is None:
                return
            if not self._down:
                self._total += now - self._since
        self._emit(role, phase, now - started, cause)

    def end(self, cause: str) -> None:
        """Close every open outage (the session is stopping)."""
        with self._lock:
            roles = list(self._down)
        for role in roles:
            self.up(role, "ended", cause)

    def paused_s(self) -> float:
        """Seconds of this session during which at least one role was down."""
        with self._lock:
            ongoing = self._clock.now() - self._since if self._down else 0.0
            return self._total + ongoing

    def _emit(
        self, role: Role, phase: Literal["down", "up", "ended"], seconds: float | None, cause: str | None
    ) -> None:
        self._events.emit(
            DowntimeEvent(ts=datetime.now(UTC), role=role, phase=phase, downtime_s=seconds, cause=cause)
        )
