"""A grading report as the audit holds it: `GradingReport`'s fields in a named tuple, validated from the
report's JSON text by the same field schema, at an eighth of the memory; and as a trial's digest keeps it.

Reads a report's text or a digest's entry (passed in); writes nothing.

A validated `GradingReport` is about 3.3 KB (its `__dict__` and its fields-set set), a `ReportView` 0.3 KB:
at 100,000 reports, 290 MB of the audit's peak and the page faults and frees that go with them. Only an
accepted report takes this path: a text the view rejects is validated again by `GradingReport`, which words
the error (and is the authority: a text it accepts is held too), so the audit names a bad report the same.

A named tuple, not a dataclass, so that a digest's entry (`encode`: the validated report's values, in JSON)
is made a view again by one tuple allocation (`decode`), not by validating the text again: 0.86 s of a
first audit's CPU at 100,000 reports, and a third of each digest's bytes.
"""

from __future__ import annotations

from datetime import datetime
from functools import cache
from typing import Any, Literal, NamedTuple

from pydantic import TypeAdapter, ValidationError

from mle_world.grading.report import GradingReport
from mle_world.records import Regime


class ReportView(NamedTuple):
    """`GradingReport`'s fields, in its order (tests/audit check they stay the same)."""

    competition_id: str
    score: float | None
    gold_threshold: float
    silver_threshold: float
    bronze_threshold: float
    median_threshold: float
    any_medal: bool
    gold_medal: bool
    silver_medal: bool
    bronze_medal: bool
    above_median: bool
    submission_exists: bool
    valid_submission: bool
    is_lower_better: bool
    created_at: datetime
    submission_path: str
    trial_id: str
    regime: Regime
    configuration: str
    seed: int
    trial_state: Literal["succeeded", "failed"] | None = None
    submission_rejected: str | None = None
    invalid_reason: str | None = None
    attempt: int | None = None
    mlebench_version: str | None = None

    def dump(self) -> dict[str, Any]:
        """The report as `GradingReport.model_dump(mode="json")` gives it (the trial pages show it)."""
        return dict(zip(self._fields, encode(self), strict=True))


CREATED_AT = ReportView._fields.index("created_at")


@cache
def _adapter() -> TypeAdapter[ReportView]:
    return TypeAdapter(ReportView)


def read_report(text: str) -> ReportView:
    """The report in `text`; raises `GradingReport`'s ValidationError when it is no valid report."""
    # A named tuple's schema takes a JSON array too, which no record is: only an object is tried.
    if text.lstrip(" \t\r\n").startswith("{"):
        try:
            return _adapter().validate_json(text)
        except ValidationError:
            pass
    report = GradingReport.model_validate_json(text)  # raises, wording the error as the records do
    return ReportView(*(getattr(report, name) for name in ReportView._fields))


def encode(report: ReportView) -> list[Any]:
    """The report's values as JSON (its fields' order, the datetime as pydantic writes it)."""
    return _adapter().dump_python(report, mode="json")  # type: ignore[no-any-return]


def entry_of(text: str) -> str | list[Any]:
    """What a trial's digest keeps of a report's text: its values (`encode`) when it is a valid report that
    JSON keeps as it is (no NaN or infinity), else the text (the audit validates it and says why)."""
    try:
        report = read_report(text)
    except ValidationError:
        return text
    values = encode(report)
    return values if decode(list(values)) == report else text


def decode(values: list[Any]) -> ReportView:
    """The report `encode` gave `values` for (consumed); raises ValueError or TypeError for any other
    shape."""
    if type(values) is not list or len(values) != len(ReportView._fields):
        raise ValueError("not a report's values")
    values[CREATED_AT] = datetime.fromisoformat(values[CREATED_AT])
    return ReportView._make(values)
