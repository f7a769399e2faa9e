"""Wall-clock and step budget of one trial, and the Kapso-style budget stage it is in.

Reads the clock passed in and the time already used by earlier sessions; writes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from mle_world.records import BudgetSettings, StageGuidance


class Clock(Protocol):
    """A monotonic clock in seconds (injected so tests can fast-forward time)."""

    def now(self) -> float: ...


class MonotonicClock:
    """The real clock: `time.monotonic`."""

    def now(self) -> float:
        return time.monotonic()


@dataclass(frozen=True)
class BudgetView:
    """A snapshot of the budget at one instant, as shown in prompts."""

    time_used_s: float
    time_left_s: float
    steps_used: int
    steps_left: int
    progress: float
    stage: StageGuidance | None


def stage_for(progress: float, stages: Sequence[StageGuidance]) -> StageGuidance | None:
    """The first stage whose `until` is above `progress`; the last stage once progress reaches 1."""
    for stage in stages:
        if progress < stage.until:
            return stage
    return stages[-1] if stages else None


class Budget:
    """Time used = time carried over from earlier sessions + wall time of this session.

    Every consumer (prompts, execution timeouts, the stop rule) asks this object, so the 12-hour
    limit counts LLM calls and executions alike, but not endpoint outages (`paused`).
    """

    def __init__(
        self,
        settings: BudgetSettings,
        clock: Clock,
        carried_s: float = 0.0,
        paused: Callable[[], float] = lambda: 0.0,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.carried_s = carried_s
        self._paused = paused
        """Seconds of this session the clock stood still (every replica of a role down)."""
        self._session_start = clock.now()

    def used(self) -> float:
        return self.carried_s + (self.clock.now() - self._session_start) - self._paused()

    def left(self) -> float:
        return max(0.0, self.settings.time_limit_s - self.used())

    def progress(self, steps: int) -> float:
        time_frac = self.used() / self.settings.time_limit_s
        step_frac = steps / self.settings.max_steps
        return min(1.0, max(time_frac, step_frac))

    def view(self, steps: int, stages: Sequence[StageGuidance]) -> BudgetView:
        progress = self.progress(steps)
        return BudgetView(
            time_used_s=self.used(),
            time_left_s=self.left(),
            steps_used=steps,
            steps_left=max(0, self.settings.max_steps - steps),
            progress=progress,
            stage=stage_for(progress, stages),
        )

    def exec_timeout(self, debug: bool) -> float:
        """min(the run's own limit, time left): a run can never outlive the trial."""
        limit = self.settings.debug_timeout_s if debug else self.settings.exec_timeout_s
        return max(0.0, min(limit, self.left()))

    def stop_reason(self, steps: int) -> str | None:
        """Why no new step may start, or None when one may."""
        if steps >= self.settings.max_steps:
            return "max_steps"
        if self.left() < max(self.settings.min_step_s, 1e-9):
            return "time_limit"
        return None
