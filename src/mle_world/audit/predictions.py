"""The world-model predictions of a trial's events.jsonl as the audit's tables need them, read fast.

Reads `<trial>/events.jsonl`; writes nothing. The predictions and the count of bad lines are exactly
what `trial_events.read_events` gives: a cheap check derived from each event record's fields vouches
for the usual line (parsed with orjson, no pydantic model built), and any line it cannot vouch for goes
through the same pydantic validator `read_events` uses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import partial
from typing import Any, NamedTuple

import orjson
from pydantic import ValidationError

from mle_world.audit.shapes import shape_of
from mle_world.records import DowntimeEvent, ExecutionEvent, LLMCallEvent, Prediction, PredictionEvent
from mle_world.storage import read_stamped, read_text, text_of
from mle_world.trial_events import EVENT as EVENT_VALIDATOR  # the validator read_events uses, per line


class PredictionLine(NamedTuple):
    """The fields of one valid prediction event that the audit's tables use."""

    stage: str
    mode: str
    valid: bool
    gate: str
    executed: bool
    counterfactual_gate: str | None
    p_improves: float | None
    p_bug: float | None
    actual_improved: bool | None
    actual_buggy: bool | None


SHAPES = {
    model.model_fields["type"].default: shape_of(model)
    for model in (LLMCallEvent, ExecutionEvent, PredictionEvent, DowntimeEvent)
}
"""By event type. A type missing here (or without a shape) is always validated by pydantic."""
OWN_FIELDS = ("stage", "gate", "executed", "actual_improved", "actual_buggy")
"""PredictionLine's fields on the event itself; the others are on its `prediction`."""
SAID_FIELDS = ("mode", "valid", "counterfactual_gate", "p_improves", "p_bug")
for _model, _names in ((PredictionEvent, OWN_FIELDS), (Prediction, SAID_FIELDS)):
    for _name in _names:  # _line reads a field absent from the line as None
        _info = _model.model_fields[_name]
        assert _info.is_required() or _info.default is None, (
            f"{_model.__name__}.{_name}'s default is not None"
        )


def _line(data: dict[str, Any]) -> PredictionLine:
    """The PredictionLine of a vouched-for line (integers in float fields as floats, as validated)."""
    said = data["prediction"]
    p_improves, p_bug = said.get("p_improves"), said.get("p_bug")
    return PredictionLine(
        stage=data["stage"],  # required: present in a vouched-for line
        mode=said.get("mode"),
        valid=said.get("valid"),
        gate=data["gate"],
        executed=data["executed"],
        counterfactual_gate=said.get("counterfactual_gate"),
        p_improves=float(p_improves) if type(p_improves) is int else p_improves,
        p_bug=float(p_bug) if type(p_bug) is int else p_bug,
        actual_improved=data.get("actual_improved"),
        actual_buggy=data.get("actual_buggy"),
    )


def _from_event(event: PredictionEvent) -> PredictionLine:
    said = event.prediction
    return PredictionLine(
        stage=event.stage,
        mode=said.mode,
        valid=said.valid,
        gate=event.gate,
        executed=event.executed,
        counterfactual_gate=said.counterfactual_gate,
        p_improves=said.p_improves,
        p_bug=said.p_bug,
        actual_improved=event.actual_improved,
        actual_buggy=event.actual_buggy,
    )


@dataclass
class PredictionLines:
    """The valid prediction events of one events.jsonl, and how many of its lines are no valid event."""

    predictions: list[PredictionLine] = field(default_factory=list)
    bad_lines: int = 0


def parse_predictions(text: str) -> PredictionLines:
    """The valid prediction events of events.jsonl text, in file order, and the bad lines."""
    out = PredictionLines()
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            data = orjson.loads(line)
        except orjson.JSONDecodeError:
            data = None
        if isinstance(data, dict):
            kind = data.get("type")
            shape = SHAPES.get(kind) if type(kind) is str else None
            admitted = shape.admit(data) if shape is not None else None
            if admitted is not None:
                if kind == "prediction":
                    out.predictions.append(_line(admitted))
                continue
        try:
            event = EVENT_VALIDATOR.validate_json(line)
        except ValidationError:
            out.bad_lines += 1
            continue
        if isinstance(event, PredictionEvent):
            out.predictions.append(_from_event(event))
    return out


def read_predictions(path: str) -> PredictionLines:
    """The valid prediction events of an events.jsonl file (none when it cannot be read)."""
    got = read_stamped(path)
    if got is not None:
        return predictions_of(got[0])
    try:
        text = read_text(path, errors="replace")
    except OSError:
        return PredictionLines()
    return parse_predictions(text)


def predictions_of(data: bytes) -> PredictionLines:
    """The valid prediction events of events.jsonl's bytes (read as `read_events` reads the file)."""
    return parse_predictions(text_of(data, "replace"))


def encode(parsed: PredictionLines) -> Any:
    """PredictionLines as JSON (None when a number would not survive JSON: not kept)."""
    finite = math.isfinite
    for line in parsed.predictions:
        p_improves, p_bug = line.p_improves, line.p_bug
        if (p_improves is not None and not finite(p_improves)) or (p_bug is not None and not finite(p_bug)):
            return None
    return [parsed.bad_lines, list(map(list, parsed.predictions))]


_make_line = partial(tuple.__new__, PredictionLine)
"""A PredictionLine of a row of its fields, without the class's Python-level `__new__`: 1.2 against 3.1 µs
for a trial's 5 predictions."""
_WIDTH = {len(PredictionLine._fields)}


def decode(data: Any) -> PredictionLines:
    bad_lines, rows = data
    if type(rows) is not list or not set(map(len, rows)) <= _WIDTH:
        raise ValueError("not prediction lines")
    return PredictionLines(list(map(_make_line, rows)), int(bad_lines))
