"""A grading report as the audit holds it: `GradingReport`'s fields in a frozen slots dataclass, validated
from the report's JSON text by the same field schema, at an eighth of the memory.

Reads a report's text (passed in); writes nothing.

A validated `GradingReport` is about 3.3 KB (its `__dict__` and its fields-set set), a `ReportView` 0.4 KB:
at 100,000 reports, 290 MB of the audit's peak and the page faults and frees that go with them. Only an
accepted report takes this path: a text the view rejects is validated again by `GradingReport`, which words
the error (and is the authority: a text it accepts is held too), so the audit names a bad report the same.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any, Literal

from pydantic import ConfigDict, TypeAdapter, ValidationError

from mle_world.grading.report import GradingReport
from mle_world.records import Regime


@dataclass(frozen=True, slots=True)
class ReportView:
    """`GradingReport`'s fields, in its order (tests/audit check they stay the same)."""

    __pydantic_config__ = ConfigDict(extra="forbid")

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
        return _adapter().dump_python(self, mode="json")  # type: ignore[no-any-return]


@cache
def _adapter() -> TypeAdapter[ReportView]:
    return TypeAdapter(ReportView)


def read_report(text: str) -> ReportView:
    """The report in `text`; raises `GradingReport`'s ValidationError when it is no valid report."""
    try:
        return _adapter().validate_json(text)
    except ValidationError:
        report = GradingReport.model_validate_json(text)  # raises, wording the error as the records do
    return ReportView(**{f.name: getattr(report, f.name) for f in dataclasses.fields(ReportView)})
