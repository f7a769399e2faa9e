"""The audit's held report (`audit/report_view.py`) against the record it stands for (`GradingReport`): the
same fields, the same texts accepted and rejected, the same problem named, the same dump.

Writes grading reports under pytest's tmp path and loads them as the audit does.
"""

from __future__ import annotations

import json
import math
import typing
from pathlib import Path

import pytest
from pydantic import ValidationError

from mle_world.audit.report_view import CREATED_AT, ReportView, decode, encode, entry_of, read_report
from mle_world.audit.trial_records import Trial, load_report
from mle_world.grading.report import GradingReport

GOOD = {
    "competition_id": "spaceship-titanic",
    "score": 0.81,
    "gold_threshold": 0.82,
    "silver_threshold": 0.81,
    "bronze_threshold": 0.8,
    "median_threshold": 0.79,
    "any_medal": True,
    "gold_medal": False,
    "silver_medal": True,
    "bronze_medal": False,
    "above_median": True,
    "submission_exists": True,
    "valid_submission": True,
    "is_lower_better": False,
    "created_at": "2026-01-02T03:04:05.678901",
    "submission_path": "/runs/aide/t_seed0/submission/submission.csv",
    "trial_id": "gated/aide/spaceship-titanic/seed0",
    "regime": "gated",
    "configuration": "aide",
    "seed": 0,
    "trial_state": "succeeded",
    "attempt": 2,
    "mlebench_version": "0.1.0 (git abc)",
}


def variant(**changes: object) -> str:
    data = {**GOOD, **changes}
    return json.dumps({k: v for k, v in data.items() if v is not ...})


HOSTILE = [
    variant(),
    variant(score=None, trial_state=..., attempt=..., mlebench_version=...),  # older report, defaults
    variant(extra_key=1),
    variant(seed="x"),
    variant(seed="3"),  # lax: a numeric string is an int for both
    variant(score="nan"),
    variant(score=1e400),
    variant(regime="both"),
    variant(trial_state="running"),
    variant(created_at="yesterday"),
    variant(created_at=0),
    variant(any_medal="yes"),
    variant(any_medal=1),
    variant(competition_id=None),
    variant(trial_id=...),
    variant(submission_path=["a"]),
    variant(seed=2**70),
    variant(attempt=1.5),
    variant(attempt=2.0),
    "[]",
    "null",
    '"text"',
    "{",
    "",
    '{"competition_id": "x"}',
    variant()[:-1] + ', "seed": 5}',  # a duplicate key: the last one counts
    variant(submission_path="\x00\u202e"),
]


def outcome(parse: object, text: str) -> tuple[str, object]:
    try:
        report = parse(text)  # type: ignore[operator]
    except ValidationError as exc:
        return "rejected", [(e["type"], e["loc"], e["msg"]) for e in exc.errors()]
    fields = GradingReport.model_fields
    return "accepted", repr({name: getattr(report, name) for name in fields})  # repr: nan == nan


def test_the_view_has_the_records_fields_in_its_order_with_its_types_and_defaults() -> None:
    hints = typing.get_type_hints(ReportView)
    assert list(ReportView._fields) == list(GradingReport.model_fields)
    for name, field in GradingReport.model_fields.items():
        assert hints[name] == field.annotation, name
        if field.is_required():
            assert name not in ReportView._field_defaults, name
        else:
            assert ReportView._field_defaults[name] == field.default, name


@pytest.mark.parametrize("text", HOSTILE)
def test_a_text_is_accepted_or_rejected_alike_and_a_rejection_worded_alike(text: str) -> None:
    assert outcome(read_report, text) == outcome(GradingReport.model_validate_json, text)


@pytest.mark.parametrize("text", HOSTILE)
def test_the_audit_names_a_bad_report_as_the_record_does(tmp_path: Path, text: str) -> None:
    path = tmp_path / "t_seed0_grading_report.json"
    path.write_text(text, encoding="utf-8")
    trial = Trial(
        trial_id=GOOD["trial_id"],  # type: ignore[arg-type]
        regime="gated",
        configuration="aide",
        task="spaceship-titanic",
        seed=0,
        output_dir=tmp_path,
        dir_text=str(tmp_path / "t_seed0"),
        report_text=str(path),
    )
    load_report(trial)
    status, detail = outcome(GradingReport.model_validate_json, text)
    if status == "accepted":
        assert trial.problem is None and trial.report is not None
        assert repr({name: getattr(trial.report, name) for name in GradingReport.model_fields}) == detail
    else:
        assert trial.report is None and trial.problem is not None
        kind, where, message = detail[0]  # type: ignore[index]
        if where:
            assert trial.problem.endswith(f"({'.'.join(map(str, where))}: {message})"), trial.problem
        else:
            assert trial.problem in ("invalid: schema", "invalid: corrupt JSON"), trial.problem


def test_the_dump_is_the_records_json_dump() -> None:
    for text in (
        variant(),
        variant(score=None, trial_state=..., attempt=...),
        variant(created_at="2026-01-02T03:04:05Z"),
        variant(created_at="2026-01-02T03:04:05.5+05:30"),
    ):
        assert read_report(text).dump() == GradingReport.model_validate_json(text).model_dump(mode="json")


@pytest.mark.parametrize("text", HOSTILE)
def test_a_digest_keeps_a_valid_reports_values_and_any_other_text_as_it_is(text: str) -> None:
    entry = entry_of(text)
    status, _ = outcome(GradingReport.model_validate_json, text)
    if isinstance(entry, str):
        # Rejected, or a number JSON cannot keep (NaN, infinity): the audit validates the text itself.
        assert entry == text
        assert status == "rejected" or any(
            v != v or v in (math.inf, -math.inf) for v in read_report(text)[1:6]
        )
    else:
        assert status == "accepted"
        assert json.loads(json.dumps(entry)) == entry  # plain JSON
        held = decode(json.loads(json.dumps(entry)))
        # Equal, and dumped alike (an aware time's tzinfo may be another class of the same offset).
        assert held == read_report(text)
        assert held.dump() == GradingReport.model_validate_json(text).model_dump(mode="json")


def test_a_digest_entry_of_another_shape_is_refused() -> None:
    values = encode(read_report(variant()))
    assert decode(list(values)) == read_report(variant())
    for wrong in (values[:-1], [*values, None], tuple(values), {"score": 1}, 42, "text"):
        with pytest.raises((ValueError, TypeError)):
            decode(wrong)  # type: ignore[arg-type]
    bad_time = list(values)
    bad_time[CREATED_AT] = "yesterday"
    with pytest.raises(ValueError):
        decode(bad_time)
    times = [variant(created_at=t) for t in ("2026-01-02T03:04:05Z", "2026-01-02T03:04:05.000001-07:00")]
    for text in times:  # aware times come back equal, and dump as the record does
        held = decode(encode(read_report(text)))
        assert held == read_report(text)
        assert held.dump() == GradingReport.model_validate_json(text).model_dump(mode="json")


def test_a_held_report_is_immutable_and_smaller_than_the_record() -> None:
    import tracemalloc

    report = read_report(variant())
    with pytest.raises(AttributeError):
        report.score = 1.0  # type: ignore[misc]
    sizes = []
    for parse in (read_report, GradingReport.model_validate_json):
        tracemalloc.start()
        held = [parse(variant(seed=i)) for i in range(200)]
        sizes.append(tracemalloc.get_traced_memory()[0])
        tracemalloc.stop()
        assert len(held) == 200
    assert sizes[0] * 3 < sizes[1], sizes
