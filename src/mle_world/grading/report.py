"""The grading report schema: MLE-bench's per-competition report, and the trial's report file.

Defines the records of `<task>_seed<seed>_grading_report.json`; reads and writes nothing itself.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from mle_world.records import Record, Regime


class CompetitionReport(Record):
    """MLE-bench's per-competition report: same fields, names, order and meanings."""

    competition_id: str
    score: float | None
    """The grader's score rounded to 5 decimals; null when missing, invalid or not finite."""
    gold_threshold: float
    silver_threshold: float
    bronze_threshold: float
    median_threshold: float
    """Median of all leaderboard scores."""
    any_medal: bool
    gold_medal: bool
    silver_medal: bool
    bronze_medal: bool
    above_median: bool
    """Strictly better than the median."""
    submission_exists: bool
    """The path is a file with suffix .csv."""
    valid_submission: bool
    """The grader returned a finite score."""
    is_lower_better: bool
    """First leaderboard score < last one (a tie counts as higher-is-better)."""
    created_at: datetime
    """Local naive time, like MLE-bench."""
    submission_path: str


class GraderReport(CompetitionReport):
    """What a grader returns: MLE-bench's report, and why the submission is invalid (MLE-bench only
    logs that: its report has no field for it)."""

    invalid_reason: str | None = None
    """Null when the submission is valid; else why not (no file, the grader's error, a score that is
    not finite, a grading process that died)."""
    mlebench_version: str | None = None
    """The MLE-bench that graded (`grading/mlebench_version.py`: version, git commit, local changes);
    null for the built-in grader of local competitions."""


class GradingReport(CompetitionReport):
    """`<task>_seed<seed>_grading_report.json`: MLE-bench's fields followed by the trial's identity."""

    trial_id: str
    regime: Regime
    configuration: str
    seed: int
    trial_state: Literal["succeeded", "failed"] | None = None
    """The trial's final state when graded: a failed trial that left a submission is graded too."""
    submission_rejected: str | None = None
    """Why the file was not graded although it exists: it is not the submission of the node the agent
    selected (its sha256 differs from the journal's, or no node was selected). Score null then."""
    invalid_reason: str | None = None
    """Null when `valid_submission`; else why the submission is invalid (as `GraderReport`; for a
    rejected file, `submission_rejected` again). Reports written before it was added have null."""
    attempt: int | None = None
    """status.json's `attempt` when the submission was graded: the audit counts the report only while the
    trial's status is final and of this attempt (a rerun supersedes it). Null in reports written before
    it was recorded, or of a trial without status.json."""
    mlebench_version: str | None = None
    """The MLE-bench that graded it: `<version> (git <commit>[ with local changes sha256 <hex>])`; null for
    the built-in grader, and in reports written before it was recorded. The audit names a table whose
    reports were graded by different MLE-bench versions."""


MLEBENCH_REPORT_FIELDS: tuple[str, ...] = tuple(CompetitionReport.model_fields)
