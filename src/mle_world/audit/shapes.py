"""The cheap check of a record's JSON objects: derived from the pydantic model's fields, it vouches that
pydantic would accept an object as it stands (the usual one), and cannot tell for the rest.

Reads and writes nothing. Used by `audit.predictions` for every line of events.jsonl.

Kept beside the pydantic validator for speed (tests/audit/test_predictions.py keeps the two in step).
Measured 2026-12-02 (load 9-15, medians of 3, alternating with pydantic alone): over the 8,538
events.jsonl of benchmarks/audit_read.py's 10,000-report sweep (5 prediction lines each) 0.44 s of CPU
against 0.50 s; on an agent-like file (per step two llm_call lines, an execution and a prediction;
800 lines) 6.7 against 9.9 us a line. Real trials write hundreds of lines: about 3 us a line is
1.7 s on a first audit of the paper's 714 trials at 800 lines each, and 24 s at 10,000 trials.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Union

from mle_world.records import Record

_ISO = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:[0-5]\d)?")
"""fromisoformat takes an offset's minutes past 59 (+00:60 is an hour), which pydantic refuses."""
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
        return data if self.passes(data) else None

    def passes(self, data: dict[str, Any]) -> bool:
        """Every field of `data` passes its check and the required ones are there."""
        keys = data.keys()
        checks = self.checks
        if not (self.required <= keys and keys <= checks.keys()):
            return False
        for name, value in data.items():
            check = checks[name]
            if type(value) not in check.types or (check.values is not None and value not in check.values):
                return False
            if value is not None and check.deep and not check.passes_deep(value):
                return False
        return True

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
