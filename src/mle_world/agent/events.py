"""The trial's event log: one JSON line per LLM call, execution, prediction and endpoint outage.

Appends to `events.jsonl` in the trial directory; safe to call from several threads.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Protocol

from mle_world.records import DowntimeEvent, ExecutionEvent, LLMCallEvent, PredictionEvent
from mle_world.storage import append_jsonl

Event = LLMCallEvent | ExecutionEvent | PredictionEvent | DowntimeEvent


class EventSink(Protocol):
    def emit(self, event: Event) -> None: ...


class EventLog:
    """Appends events as `model_dump_json()` lines; a lock keeps concurrent lines whole."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self.llm_time_s = 0.0

    def emit(self, event: Event) -> None:
        with self._lock:
            if isinstance(event, LLMCallEvent):
                self.llm_time_s += event.latency_s
            append_jsonl(self.path, event.model_dump(mode="json"))


class MemorySink:
    """Keeps events in a list (tests and benchmarks)."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._lock = threading.Lock()
        self.llm_time_s = 0.0

    def emit(self, event: Event) -> None:
        with self._lock:
            if isinstance(event, LLMCallEvent):
                self.llm_time_s += event.latency_s
            self.events.append(event)
