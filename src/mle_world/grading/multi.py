"""The Grader protocol, and the grader that picks the built-in or the MLE-bench one per task.

Reads what the chosen grader reads (submission, answers, leaderboard); writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from mle_world.grading.builtin import BuiltinGrader
from mle_world.grading.mlebench import make_mlebench_grader
from mle_world.grading.report import GraderReport


class Grader(Protocol):
    """Scores one submission of one task; never raises for a bad submission."""

    def grade(self, task: str, submission_path: Path) -> GraderReport:
        """MLE-bench's report for `submission_path` (invalid/missing → valid_submission false, and why)."""
        ...


class MultiGrader:
    """Picks the built-in or the MLE-bench grader per task; MLE-bench is imported on first use."""

    def __init__(self, data_dir: Path, local_competitions: Mapping[str, Path]) -> None:
        self.data_dir = data_dir
        self.builtin = BuiltinGrader(local_competitions, data_dir)
        self._mlebench: Grader | None = None

    def grade(self, task: str, submission_path: Path) -> GraderReport:
        """Dispatch by task id."""
        if task in self.builtin.competitions:
            return self.builtin.grade(task, submission_path)
        if self._mlebench is None:
            self._mlebench = make_mlebench_grader(self.data_dir)
        return self._mlebench.grade(task, submission_path)
