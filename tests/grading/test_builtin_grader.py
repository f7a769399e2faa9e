"""Built-in grader on local competitions: both directions, medals, invalid submissions never crash."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd
import pytest
from gradekit import submit

from mle_world.errors import NotPreparedError
from mle_world.grading.builtin import BuiltinGrader

Make = Callable[[str, Sequence[float]], tuple[dict[str, Path], Path]]


def answers(data: Path, comp: str) -> pd.DataFrame:
    return pd.read_csv(data / comp / "prepared" / "private" / "test.csv")


def test_higher_is_better_accuracy(tmp_path: Path, prepared_data: Path, local_comps: dict[str, Path]) -> None:
    grader = BuiltinGrader(local_comps, prepared_data)
    truth = answers(prepared_data, "iris-species")
    perfect = submit(tmp_path / "perfect.csv", truth.to_csv(index=False))
    report = grader.grade("iris-species", perfect)
    assert report.score == 1.0 and report.valid_submission and report.gold_medal and report.any_medal
    assert report.is_lower_better is False
    # 9 of 45 wrong: accuracy 36/45 = 0.8 (below the leaderboard median 0.86667).
    wrong = truth.copy()
    wrong.loc[:8, "species"] = wrong.loc[:8, "species"].map(
        {"setosa": "virginica", "versicolor": "setosa", "virginica": "versicolor"}
    )
    report = grader.grade("iris-species", submit(tmp_path / "wrong.csv", wrong.to_csv(index=False)))
    assert report.score == 0.8 and not report.any_medal and not report.above_median


def test_lower_is_better_rmse(tmp_path: Path, prepared_data: Path, local_comps: dict[str, Path]) -> None:
    grader = BuiltinGrader(local_comps, prepared_data)
    truth = answers(prepared_data, "diabetes-progression")
    report = grader.grade("diabetes-progression", submit(tmp_path / "p.csv", truth.to_csv(index=False)))
    assert report.is_lower_better is True
    assert report.score == 0.0 and report.gold_medal
    off = truth.assign(progression=truth["progression"] + 1000.0 / 3.0)
    report = grader.grade("diabetes-progression", submit(tmp_path / "o.csv", off.to_csv(index=False)))
    assert report.score == round(1000.0 / 3.0, 5) == 333.33333  # rounded to 5 decimals
    assert not report.any_medal and not report.above_median and report.valid_submission


def test_missing_file_is_an_invalid_report(
    tmp_path: Path, prepared_data: Path, local_comps: dict[str, Path]
) -> None:
    report = BuiltinGrader(local_comps, prepared_data).grade("iris-species", tmp_path / "nope.csv")
    assert report.submission_exists is False and report.valid_submission is False and report.score is None
    assert report.any_medal is False and report.gold_threshold == 1.0


def test_wrong_suffix_counts_as_missing(
    tmp_path: Path, prepared_data: Path, local_comps: dict[str, Path]
) -> None:
    path = submit(tmp_path / "submission.txt", answers(prepared_data, "iris-species").to_csv(index=False))
    report = BuiltinGrader(local_comps, prepared_data).grade("iris-species", path)
    assert report.submission_exists is False and report.valid_submission is False
    assert report.invalid_reason == "the submission's name does not end in .csv"


@pytest.mark.parametrize(
    ("mutate", "why"),
    [
        (lambda df: df.rename(columns={"species": "label"}), "missing column(s) ['species']"),
        (lambda df: df.drop(columns=["id"]), "missing column(s) ['id']"),
        (lambda df: df.iloc[:-1], "expected 45 rows, got 44"),
        (lambda df: df.assign(species=None), "missing (NaN) predictions"),
        (lambda df: df.assign(species="tulip"), "unknown species label(s): ['tulip']"),
        (lambda df: df.assign(id=df["id"] + 1000), "values of 'id' do not match the test set"),
        (lambda df: pd.concat([df.iloc[:-1], df.iloc[:1]]), "duplicate values in column 'id'"),
    ],
)
def test_malformed_submission_is_invalid_and_says_why(
    tmp_path: Path,
    prepared_data: Path,
    local_comps: dict[str, Path],
    mutate: Callable[[pd.DataFrame], pd.DataFrame],
    why: str,
) -> None:
    bad = mutate(answers(prepared_data, "iris-species"))
    path = submit(tmp_path / "bad.csv", bad.to_csv(index=False))
    report = BuiltinGrader(local_comps, prepared_data).grade("iris-species", path)
    assert report.submission_exists is True and report.valid_submission is False and report.score is None
    assert not any((report.gold_medal, report.silver_medal, report.bronze_medal, report.above_median))
    assert (report.invalid_reason or "").startswith("invalid submission: ") and why in report.invalid_reason


def test_garbage_and_empty_files_do_not_crash(
    tmp_path: Path, prepared_data: Path, local_comps: dict[str, Path]
) -> None:
    grader = BuiltinGrader(local_comps, prepared_data)
    empty = submit(tmp_path / "empty.csv", "")
    binary = tmp_path / "binary.csv"
    binary.write_bytes(b"\x00\xff\xfe garbage \x00")
    for path, why in ((empty, "EmptyDataError"), (binary, "UnicodeDecodeError")):
        report = grader.grade("diabetes-progression", path)
        assert report.valid_submission is False and report.submission_exists is True
        assert (report.invalid_reason or "").startswith(f"grading error: {why}: ")
    report = grader.grade("diabetes-progression", tmp_path / "absent.csv")
    assert (report.submission_exists, report.invalid_reason) == (False, "no submission file")


def test_nan_score_is_invalid(tmp_path: Path, custom_competition: Make) -> None:
    comps, data = custom_competition("value-comp", [3.0, 2.0, 1.0])
    grader = BuiltinGrader(comps, data)
    report = grader.grade("value-comp", submit(tmp_path / "s.csv", "id,value\n1,nan-score\n"))
    assert report.score is None and report.valid_submission is False and report.submission_exists is True
    assert report.invalid_reason == "the grader's score nan is not a finite number"
    report = grader.grade("value-comp", submit(tmp_path / "t.csv", "id,value\n1,2.123456789\n"))
    assert report.score == 2.12346 and report.silver_medal is False and report.gold_medal is False
    assert report.invalid_reason is None


@pytest.mark.parametrize("n", [60, 120, 400, 1200])
def test_end_to_end_medal_boundaries_per_bracket(tmp_path: Path, custom_competition: Make, n: int) -> None:
    scores = [float(1000 - r) for r in range(1, n + 1)]
    comps, data = custom_competition(f"value-{n}", scores)
    grader = BuiltinGrader(comps, data)
    gold, silver, bronze = {60: (6, 12, 24), 120: (10, 24, 48), 400: (10, 50, 100), 1200: (12, 60, 120)}[n]
    expect = {
        1000 - gold: "gold",
        1000 - gold - 0.5: "silver",
        1000 - silver: "silver",
        1000 - silver - 0.5: "bronze",
        1000 - bronze: "bronze",
        1000 - bronze - 0.5: "none",
    }
    for i, (score, medal) in enumerate(expect.items()):
        report = grader.grade(f"value-{n}", submit(tmp_path / f"s{i}.csv", f"id,value\n1,{score}\n"))
        got = (
            "gold"
            if report.gold_medal
            else "silver"
            if report.silver_medal
            else "bronze"
            if report.bronze_medal
            else "none"
        )
        assert got == medal, (n, score)
        assert report.any_medal == (medal != "none")


def test_not_prepared_is_a_user_error(tmp_path: Path, local_comps: dict[str, Path]) -> None:
    with pytest.raises(NotPreparedError, match="run_paper.py prepare"):
        BuiltinGrader(local_comps, tmp_path).grade("iris-species", tmp_path / "s.csv")
