"""The grading report keeps MLE-bench's per-competition fields, names and order, plus trial fields."""

from __future__ import annotations

import json
from pathlib import Path

from gradekit import spec_for, submit

from mle_world.grading.builtin import BuiltinGrader
from mle_world.grading.grader import grade_trial
from mle_world.grading.report import CompetitionReport, GradingReport

# Copied from reference/mlebench.md §5 ("Per-competition report fields, in order").
MLEBENCH_FIELDS = [
    "competition_id",
    "score",
    "gold_threshold",
    "silver_threshold",
    "bronze_threshold",
    "median_threshold",
    "any_medal",
    "gold_medal",
    "silver_medal",
    "bronze_medal",
    "above_median",
    "submission_exists",
    "valid_submission",
    "is_lower_better",
    "created_at",
    "submission_path",
]
TRIAL_FIELDS = [
    "trial_id",
    "regime",
    "configuration",
    "seed",
    "trial_state",
    "submission_rejected",
    "invalid_reason",
    "attempt",
    "mlebench_version",
]


def test_competition_report_fields_equal_mlebench() -> None:
    assert list(CompetitionReport.model_fields) == MLEBENCH_FIELDS


def test_grading_report_adds_trial_fields_after_mlebench_fields() -> None:
    assert list(GradingReport.model_fields) == MLEBENCH_FIELDS + TRIAL_FIELDS


def test_written_report_has_fields_in_order(
    tmp_path: Path, prepared_data: Path, local_comps: dict[str, Path]
) -> None:
    spec = spec_for("iris-species", seed=35, regime="ungated", configuration="aide")
    trial = tmp_path / "runs" / "aide" / "iris-species_seed35"
    answers = (prepared_data / "iris-species" / "prepared" / "private" / "test.csv").read_text()
    submit(trial / "submission" / "submission.csv", answers)
    grade_trial(trial, spec, prepared_data, BuiltinGrader(local_comps, prepared_data))
    path = tmp_path / "runs" / "aide" / "iris-species_seed35_grading_report.json"
    data = json.loads(path.read_text())
    assert list(data) == MLEBENCH_FIELDS + TRIAL_FIELDS
    assert data["trial_id"] == "ungated/aide/iris-species/seed35"
    assert (data["regime"], data["configuration"], data["seed"]) == ("ungated", "aide", 35)
    assert data["score"] == 1.0 and data["gold_medal"] is True and data["is_lower_better"] is False
    assert "T" in data["created_at"] and "+" not in data["created_at"]  # local naive ISO time
    assert data["submission_path"] == str(trial / "submission" / "submission.csv")
