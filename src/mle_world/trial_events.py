"""A trial's events.jsonl read back: LLM calls, executions, predictions and downtime, bad lines counted.

Reads `<trial>/events.jsonl` (written by the agent's `agent.events.EventLog`); writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

from pydantic import Field, TypeAdapter, ValidationError

from mle_world.records import DowntimeEvent, ExecutionEvent, LLMCallEvent, PredictionEvent
from mle_world.storage import read_text


@dataclass
class TrialEvents:
    """Parsed events.jsonl; unreadable lines are counted, never fatal."""

    llm: list[LLMCallEvent] = field(default_factory=list)
    executions: list[ExecutionEvent] = field(default_factory=list)
    predictions: list[PredictionEvent] = field(default_factory=list)
    downtime: list[DowntimeEvent] = field(default_factory=list)
    bad_lines: int = 0
    missing: bool = False


EVENT: TypeAdapter[LLMCallEvent | ExecutionEvent | PredictionEvent | DowntimeEvent] = TypeAdapter(
    Annotated[LLMCallEvent | ExecutionEvent | PredictionEvent | DowntimeEvent, Field(discriminator="type")]
)
"""One events.jsonl line, parsed and validated in one pass (a bad or unknown line raises ValidationError)."""


def read_events(path: Path) -> TrialEvents:
    """Read events.jsonl tolerantly: a corrupted or unknown line counts as a bad line."""
    log = TrialEvents()
    try:
        text = read_text(path, errors="replace")
    except OSError:
        log.missing = True
        return log
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            event = EVENT.validate_json(line)
        except ValidationError:
            log.bad_lines += 1
            continue
        if isinstance(event, LLMCallEvent):
            log.llm.append(event)
        elif isinstance(event, ExecutionEvent):
            log.executions.append(event)
        elif isinstance(event, PredictionEvent):
            log.predictions.append(event)
        elif isinstance(event, DowntimeEvent):
            log.downtime.append(event)
    return log
