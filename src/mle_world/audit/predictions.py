"""The world-model predictions of a trial's events.jsonl as the audit's tables need them, read fast.

Reads `<trial>/events.jsonl`; writes nothing. The predictions and the count of bad lines are exactly
what `trial_events.read_events` gives: a cheap check derived from each event record's fields vouches
for the usual line (parsed with orjson, no pydantic model built), and any line it cannot vouch for goes
through the same pydantic validator `read_events` uses.
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, NamedTuple, Union

import orjson
from pydantic import ValidationError

from mle_world.audit.cache import read_stamped, text_of
from mle_world.records import DowntimeEvent, ExecutionEvent, LLMCallEvent, Prediction, PredictionEvent, Record
from mle_world.trial_events import _EVENT as EVENT_VALIDATOR  # the validator read_events uses, per line


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


_ISO = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})?")
NONE = type(None)


def is_timestamp(value: str) -> bool:
    """An ISO 8601 date-time pydantic accepts (a narrower form than it accepts: others fall back)."""
    if not _ISO.fullmatch(value):
        return False
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class FieldCheck:
    """What JSON values a field takes as they stand: their types, for a Literal its values, for a
    timestamp the string check, for a record its shape, for a tuple its items' check. Passing it
    implies pydantic accepts the value (up to int → float, list → tuple)."""

    types: frozenset[type]
    values: frozenset[Any] | None = None
    timestamp: bool = False
    shape: Shape | None = None
    items: FieldCheck | None = None

    deep: bool = False
    """A value needs more than its type and literal values checked (set by `__post_init__`)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "deep", self.timestamp or self.shape is not None or self.items is not None)

    def passes(self, value: Any) -> bool:
        if type(value) not in self.types:
            return False
        if self.values is not None and value not in self.values:
            return False
        return value is None or not self.deep or self.passes_deep(value)

    def passes_deep(self, value: Any) -> bool:
        """The timestamp, record or items check of a value of the right type (not None)."""
        if self.timestamp and not is_timestamp(value):
            return False
        if self.shape is not None and not self.shape.vouches(value):
            return False
        return self.items is None or all(self.items.passes(item) for item in value)


def field_check(annotation: Any) -> FieldCheck | None:
    """The check of one field's annotation, or None when only pydantic can tell."""
    simple: dict[Any, set[type]] = {
        bool: {bool},
        str: {str},
        int: {int},
        float: {float, int},
        datetime: {str},
    }
    if annotation in simple:
        return FieldCheck(frozenset(simple[annotation]), timestamp=annotation is datetime)
    if isinstance(annotation, type) and issubclass(annotation, Record):
        shape = shape_of(annotation)
        return None if shape is None else FieldCheck(frozenset({dict}), shape=shape)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Literal and all(type(a) is str for a in args):
        return FieldCheck(frozenset({str}), frozenset(args))
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        items = field_check(args[0])
        return None if items is None else FieldCheck(frozenset({list}), items=items)
    if origin in (Union, types.UnionType) and len(args) == 2 and NONE in args:
        inner = field_check(next(a for a in args if a is not NONE))
        if inner is None:
            return None
        values = None if inner.values is None else inner.values | {None}
        return dataclasses.replace(inner, types=inner.types | {NONE}, values=values)
    return None


@dataclass(frozen=True)
class Shape:
    """What a valid JSON object of one record looks like: its fields' checks, the required fields, and
    the record's "before" validators (run first, as pydantic runs them)."""

    checks: dict[str, FieldCheck]
    required: frozenset[str]
    before: tuple[Callable[[Any], Any], ...] = ()

    def admit(self, data: dict[str, Any]) -> dict[str, Any] | None:
        """`data` as the record's "before" validators hand it to field validation, when every field
        passes its check; None when the check cannot vouch for it (pydantic decides then)."""
        for validator in self.before:
            try:
                data = validator(data)
            except Exception:  # pydantic would report it (or raise it): not for the cheap path
                return None
            if not isinstance(data, dict):
                return None
        keys = data.keys()
        checks = self.checks
        if not (self.required <= keys and keys <= checks.keys()):
            return None
        for name, value in data.items():  # the common checks inline: this runs for every line
            check = checks[name]
            if type(value) not in check.types or (check.values is not None and value not in check.values):
                return None
            if value is not None and check.deep and not check.passes_deep(value):
                return None
        return data

    def vouches(self, data: dict[str, Any]) -> bool:
        """A nested object passes unchanged by the validators (its values are read as they stand)."""
        return self.admit(data) is data


def shape_of(model: type[Record]) -> Shape | None:
    """The cheap check of `model`'s objects; None when some field or validator needs pydantic."""
    decorators = model.__pydantic_decorators__
    if decorators.validators or decorators.field_validators or decorators.root_validators:
        return None
    if any(d.info.mode != "before" for d in decorators.model_validators.values()):
        return None
    before = tuple(getattr(model, name) for name in decorators.model_validators)
    checks = {}
    for name, info in model.model_fields.items():
        check = field_check(info.annotation)
        if check is None or info.metadata or info.alias or info.validation_alias:
            return None
        checks[name] = check
    required = frozenset(n for n, info in model.model_fields.items() if info.is_required())
    return Shape(checks, required, before)


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


def _number(value: Any) -> float | None:
    return float(value) if type(value) is int else value


def _line(data: dict[str, Any]) -> PredictionLine:
    """The PredictionLine of a vouched-for line (integers in float fields as floats, as validated)."""
    get: Callable[[str], Any] = data.get
    said: Callable[[str], Any] = data["prediction"].get
    return PredictionLine(
        stage=get("stage"),
        mode=said("mode"),
        valid=said("valid"),
        gate=get("gate"),
        executed=get("executed"),
        counterfactual_gate=said("counterfactual_gate"),
        p_improves=_number(said("p_improves")),
        p_bug=_number(said("p_bug")),
        actual_improved=get("actual_improved"),
        actual_buggy=get("actual_buggy"),
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
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return PredictionLines()
    return parse_predictions(text)


def predictions_of(data: bytes) -> PredictionLines:
    """The valid prediction events of events.jsonl's bytes (read as `read_events` reads the file)."""
    return parse_predictions(text_of(data, "replace"))


def encode(parsed: PredictionLines) -> Any:
    """PredictionLines as JSON (None when a number would not survive JSON: not kept)."""
    numbers = [x for p in parsed.predictions for x in (p.p_improves, p.p_bug) if x is not None]
    if not all(math.isfinite(x) for x in numbers):
        return None
    return [parsed.bad_lines, [list(p) for p in parsed.predictions]]


def decode(data: Any) -> PredictionLines:
    bad_lines, rows = data
    return PredictionLines([PredictionLine(*row) for row in rows], int(bad_lines))
