"""Checks of a submission against the answers, for competitions' grade.py files and the graders.

Reads nothing itself (frames are passed in); writes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # frames are passed in; importing pandas here would cost every reader of reports ~0.3 s
    import pandas as pd


class InvalidSubmissionError(Exception):
    """A submission that cannot be graded (wrong columns, ids, NaN); the score becomes null.

    Mirrors `mlebench.grade_helpers.InvalidSubmissionError` so local graders do not need mlebench.
    """


def submission_exists(path: Path) -> bool:
    """MLE-bench's rule: a file whose suffix is .csv."""
    return path.is_file() and path.suffix.lower() == ".csv"


def missing_reason(path: Path) -> str:
    """Why `submission_exists(path)` is false."""
    if not path.exists():
        return "no submission file"
    if not path.is_file():
        return "the submission is not a regular file"
    return "the submission's name does not end in .csv"


def prepare_for_metric(
    submission: pd.DataFrame,
    answers: pd.DataFrame,
    id_column: str,
    target_columns: Sequence[str],
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Check columns, ids and values of a submission; return both frames aligned by id.

    Raises InvalidSubmissionError for missing columns, wrong length, unknown or duplicate ids and
    missing (NaN) predictions.
    """
    required = [id_column, *target_columns]
    missing = [c for c in required if c not in submission.columns]
    if missing:
        raise InvalidSubmissionError(f"missing column(s) {missing}; expected {required}")
    if len(submission) != len(answers):
        raise InvalidSubmissionError(f"expected {len(answers)} rows, got {len(submission)}")
    sub = submission[required].copy()
    ans = answers[required].copy()
    sub[id_column] = sub[id_column].astype(str)
    ans[id_column] = ans[id_column].astype(str)
    if sub[id_column].duplicated().any():
        raise InvalidSubmissionError(f"duplicate values in column {id_column!r}")
    if set(sub[id_column]) != set(ans[id_column]):
        raise InvalidSubmissionError(f"values of {id_column!r} do not match the test set")
    if sub[list(target_columns)].isna().to_numpy().any():
        raise InvalidSubmissionError("submission contains missing (NaN) predictions")
    sub = sub.sort_values(id_column).reset_index(drop=True)
    ans = ans.sort_values(id_column).reset_index(drop=True)
    return sub, ans
