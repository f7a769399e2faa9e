"""The built-in grader: local competition folders graded by their own grade.py and MLE-bench's medal rules.

Reads the submission, the task's private answers (under the data dir) and its leaderboard.csv; writes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from mle_world.errors import NotPreparedError, UserError
from mle_world.grading.medals import build_report, normalise_score, not_finite_reason, read_leaderboard_scores
from mle_world.grading.report import GraderReport
from mle_world.grading.submission import InvalidSubmissionError, submission_exists
from mle_world.tasks.local import read_csv_exact

log = logging.getLogger(__name__)


GradeFn = Callable[[pd.DataFrame, Any], Any]


class BuiltinGrader:
    """Grades local competition folders in MLE-bench's format with their own `grade.py`."""

    def __init__(self, competitions: Mapping[str, Path], data_dir: Path) -> None:
        self.competitions = dict(competitions)
        self.data_dir = data_dir

    def grade(self, task: str, submission_path: Path) -> GraderReport:
        """Grade with the folder's grade_fn and MLE-bench's medal rules."""
        from mle_world.tasks.local import load_answers, load_competition, load_grade_fn

        if task not in self.competitions:
            raise UserError(f"unknown local competition {task!r}")
        comp = load_competition(self.competitions[task])
        answers_path = self.data_dir / comp.answers
        if not answers_path.is_file():
            raise NotPreparedError(
                f"{answers_path}: answers missing; run `run_paper.py prepare --data-dir {self.data_dir}`"
            )
        scores = read_leaderboard_scores(comp.directory / "leaderboard.csv")
        grade_fn = load_grade_fn(comp)
        exists = submission_exists(submission_path)
        score: float | None = None
        reason = None
        if exists:
            score, reason = _call_grade_fn(
                grade_fn, submission_path, lambda: load_answers(answers_path), task
            )
        return build_report(comp.id, score, scores, submission_path, exists, reason)


def _call_grade_fn(
    grade_fn: GradeFn, submission_path: Path, answers: Callable[[], Any], task: str
) -> tuple[float | None, str | None]:
    """Run a grader like MLE-bench does: any exception means an invalid submission. (score, why not)."""
    try:
        submission = read_csv_exact(submission_path)
        raw = grade_fn(submission, answers())
    except InvalidSubmissionError as exc:
        reason = f"invalid submission: {exc}"
    except Exception as exc:  # noqa: BLE001 - MLE-bench treats every grader error as invalid
        reason = f"grading error: {type(exc).__name__}: {exc}"
    else:
        score = normalise_score(raw)
        return score, None if score is not None else not_finite_reason(raw)
    log.warning("%s: %s", task, reason)
    return None, reason
