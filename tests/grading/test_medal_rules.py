"""MLE-bench's medal rules: threshold positions per team-count bracket, inclusivity, direction."""

from __future__ import annotations

import pytest

from mle_world.grading.medals import is_lower_better, medal_positions, rank_score, thresholds

# (n teams, gold row, silver row, bronze row) from reference/mlebench.md §5, computed by hand.
POSITIONS = [
    (1, 1, 1, 1),
    (5, 1, 1, 2),
    (50, 5, 10, 20),
    (99, 9, 19, 39),
    (100, 10, 20, 40),
    (120, 10, 24, 48),
    (249, 10, 49, 99),
    (250, 10, 50, 100),
    (500, 11, 50, 100),
    (999, 11, 50, 100),
    (1000, 12, 50, 100),
    (1500, 13, 75, 150),
    (4000, 18, 200, 400),
]


@pytest.mark.parametrize(("n", "gold", "silver", "bronze"), POSITIONS)
def test_medal_positions(n: int, gold: int, silver: int, bronze: int) -> None:
    assert medal_positions(n) == (gold, silver, bronze)


def test_empty_leaderboard_is_an_error() -> None:
    with pytest.raises(ValueError):
        medal_positions(0)


@pytest.mark.parametrize(("n", "gold", "silver", "bronze"), POSITIONS[2:])
@pytest.mark.parametrize("lower", [False, True])
def test_boundaries_are_inclusive_and_exclusive_between_medals(
    n: int, gold: int, silver: int, bronze: int, lower: bool
) -> None:
    # Row r (1-indexed) has score 1000 - r (higher better) or r (lower better).
    scores = [float(r) if lower else float(1000 - r) for r in range(1, n + 1)]
    th = thresholds(scores)
    assert (th.gold, th.silver, th.bronze) == (scores[gold - 1], scores[silver - 1], scores[bronze - 1])
    worse = 0.5 if lower else -0.5  # half a row worse
    cases = [
        (th.gold, (True, False, False)),
        (th.gold + worse, (False, True, False)),
        (th.silver, (False, True, False)),
        (th.silver + worse, (False, False, True)),
        (th.bronze, (False, False, True)),
        (th.bronze + worse, (False, False, False)),
    ]
    for score, medals in cases:
        _, rank = rank_score(score, scores)
        assert (rank.gold_medal, rank.silver_medal, rank.bronze_medal) == medals, score


def test_median_is_strict_and_direction_aware() -> None:
    higher = [10.0, 8.0, 6.0, 4.0]
    assert thresholds(higher).median == 7.0
    assert rank_score(7.0, higher)[1].above_median is False
    assert rank_score(7.1, higher)[1].above_median is True
    lower = [1.0, 2.0, 3.0]
    assert is_lower_better(lower)
    assert rank_score(2.0, lower)[1].above_median is False
    assert rank_score(1.9, lower)[1].above_median is True


def test_tie_counts_as_higher_is_better() -> None:
    assert is_lower_better([0.5, 0.5, 0.5]) is False


def test_no_score_no_medal_but_thresholds() -> None:
    scores = [float(x) for x in range(100, 0, -1)]
    th, rank = rank_score(None, scores)
    assert th.gold == 91.0 and th.silver == 81.0 and th.bronze == 61.0 and th.median == 50.5
    assert rank == (False, False, False, False)
