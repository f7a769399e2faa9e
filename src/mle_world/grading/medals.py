"""MLE-bench's medal rules: thresholds from a leaderboard, rank of a score, the report built from them.

Reads a competition's leaderboard.csv; writes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd

from mle_world.errors import UserError
from mle_world.grading.report import GraderReport
from mle_world.grading.submission import missing_reason
from mle_world.grading.submission import submission_exists as submission_exists


class Thresholds(NamedTuple):
    """Medal and median thresholds of a leaderboard."""

    gold: float
    silver: float
    bronze: float
    median: float


class Rank(NamedTuple):
    """Where a score lands on a leaderboard."""

    gold_medal: bool
    silver_medal: bool
    bronze_medal: bool
    above_median: bool


def is_lower_better(scores: Sequence[float]) -> bool:
    """MLE-bench's rule: the first (best) score is below the last one."""
    if len(scores) == 0:
        raise ValueError("Number of teams in leaderboard must be greater than 0.")
    return bool(scores[0] < scores[-1])


def medal_positions(num_teams: int) -> tuple[int, int, int]:
    """1-indexed leaderboard rows of the gold, silver and bronze thresholds (Kaggle progression)."""
    n = num_teams
    if 1 <= n < 100:
        return max(1, int(n * 0.1)), max(1, int(n * 0.2)), max(1, int(n * 0.4))
    if 100 <= n < 250:
        return 10, max(1, int(n * 0.2)), max(1, int(n * 0.4))
    if 250 <= n < 1000:
        return 10 + int(n * 0.002), 50, 100
    if n >= 1000:
        return 10 + int(n * 0.002), max(1, int(n * 0.05)), max(1, int(n * 0.1))
    raise ValueError("Number of teams in leaderboard must be greater than 0.")


def thresholds(scores: Sequence[float]) -> Thresholds:
    """Thresholds of a best-to-worst leaderboard, exactly as MLE-bench's `Grader.rank_score`."""
    gold, silver, bronze = medal_positions(len(scores))
    median = float(pd.Series(list(scores), dtype=float).median())
    return Thresholds(float(scores[gold - 1]), float(scores[silver - 1]), float(scores[bronze - 1]), median)


def rank_score(score: float | None, scores: Sequence[float]) -> tuple[Thresholds, Rank]:
    """Medals (inclusive, mutually exclusive) and above-median (strict) of `score`."""
    th = thresholds(scores)
    if score is None:
        return th, Rank(False, False, False, False)
    lower = is_lower_better(scores)

    def at_least(threshold: float) -> bool:
        return score <= threshold if lower else score >= threshold

    gold = at_least(th.gold)
    silver = not gold and at_least(th.silver)
    bronze = not gold and not silver and at_least(th.bronze)
    above = score < th.median if lower else score > th.median
    return th, Rank(bool(gold), bool(silver), bool(bronze), bool(above))


def not_finite_reason(raw: Any) -> str:
    """Why `normalise_score` gave None."""
    return f"the grader's score {raw!r} is not a finite number"


def normalise_score(raw: Any) -> float | None:
    """MLE-bench's `round(score, 5)` on the grader's value; non-numeric, NaN and infinite scores become
    None (invalid). MLE-bench itself keeps ±inf (and can give it a medal): we do not."""
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(value):
        return None
    try:
        # Round the grader's own value as MLE-bench does: numpy rounds 0.487795 to 0.4878 where
        # Python's float rounding gives 0.48779, and the reports must agree digit for digit.
        return float(round(raw, 5))
    except TypeError:
        return round(value, 5)


def local_now() -> datetime:
    """Local naive time (MLE-bench's `datetime.now()`)."""
    return datetime.now(UTC).astimezone().replace(tzinfo=None)


def build_report(
    competition_id: str,
    score: float | None,
    leaderboard_scores: Sequence[float],
    submission_path: Path,
    submission_exists: bool,
    invalid_reason: str | None = None,
) -> GraderReport:
    """Assemble a report from a (normalised) score and the leaderboard; `invalid_reason` when the score is
    None (a generic one if not given)."""
    th, rank = rank_score(score, leaderboard_scores)
    if score is not None:
        invalid_reason = None
    elif invalid_reason is None:
        invalid_reason = missing_reason(submission_path) if not submission_exists else "no score"
    return GraderReport(
        competition_id=competition_id,
        score=score,
        gold_threshold=th.gold,
        silver_threshold=th.silver,
        bronze_threshold=th.bronze,
        median_threshold=th.median,
        any_medal=rank.gold_medal or rank.silver_medal or rank.bronze_medal,
        gold_medal=rank.gold_medal,
        silver_medal=rank.silver_medal,
        bronze_medal=rank.bronze_medal,
        above_median=rank.above_median,
        submission_exists=submission_exists,
        valid_submission=score is not None,
        is_lower_better=is_lower_better(leaderboard_scores),
        created_at=local_now(),
        submission_path=str(submission_path),
        invalid_reason=invalid_reason,
    )


LFS_POINTER = b"version https://git-lfs.github.com/spec/"


def refuse_lfs_pointer(path: Path) -> None:
    """UserError when the leaderboard is a Git LFS pointer (MLE-bench cloned without `git lfs pull`, or
    unpacked from a `git archive`): every grade against it would crash or rank against nothing."""
    try:
        with path.open("rb") as handle:
            head = handle.read(len(LFS_POINTER))
    except OSError:
        return  # unreadable: whoever reads it next says why
    if head == LFS_POINTER:
        raise UserError(lfs_pointer_message(path))


def lfs_pointer_message(path: Path) -> str:
    """What is wrong with a leaderboard that is a Git LFS pointer, and the fix."""
    return (
        f"{path}: a Git LFS pointer, not a leaderboard: run `git lfs pull` in the MLE-bench checkout, "
        "or put the real leaderboard.csv there"
    )


def read_leaderboard_scores(path: Path) -> list[float]:
    """Scores of a Kaggle leaderboard export, best to worst; UserError when unusable."""
    refuse_lfs_pointer(path)
    try:
        frame = pd.read_csv(path)
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: cannot read leaderboard ({exc})") from exc
    if "score" not in frame.columns or len(frame) == 0:
        raise UserError(f"{path}: leaderboard must have a `score` column and at least one row")
    return [float(s) for s in frame["score"]]
