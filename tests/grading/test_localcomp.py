"""Local competitions: discovery, id clashes, deterministic idempotent preparation, leaderboards."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from mle_world.errors import UserError
from mle_world.grading.medals import is_lower_better, read_leaderboard_scores
from mle_world.tasks.local import (
    is_prepared,
    list_local_competitions,
    load_competition,
    prepare_local,
)
from mle_world.tasks.registry import leaderboard_direction

SHIPPED = {"iris-species": False, "breast-cancer-diagnosis": False, "diabetes-progression": True}
TARGETS = {
    "iris-species": "species",
    "breast-cancer-diagnosis": "malignant",
    "diabetes-progression": "progression",
}


def test_package_competitions_are_listed(local_comps: dict[str, Path]) -> None:
    assert set(SHIPPED) <= set(local_comps)
    for comp_id, folder in local_comps.items():
        comp = load_competition(folder)
        assert comp.id == comp_id == folder.name
        for name in ("config.yaml", "prepare.py", "grade.py", "description.md", "leaderboard.csv"):
            assert (folder / name).is_file(), (comp_id, name)


@pytest.mark.parametrize("comp_id", sorted(SHIPPED))
def test_leaderboards_are_kaggle_exports_best_to_worst(local_comps: dict[str, Path], comp_id: str) -> None:
    frame = pd.read_csv(local_comps[comp_id] / "leaderboard.csv")
    assert list(frame.columns) == [
        "scoreNullable",
        "teamId",
        "hasTeamName",
        "submissionDate",
        "score",
        "hasScore",
    ]
    assert len(frame) >= 100
    scores = frame["score"].tolist()
    assert is_lower_better(scores) is SHIPPED[comp_id]
    assert scores == sorted(scores, reverse=not SHIPPED[comp_id])
    assert len(set(scores)) > 10  # real baselines of varied strength


def test_extra_dir_and_clash(tmp_path: Path, local_comps: dict[str, Path]) -> None:
    extra = tmp_path / "mine"
    shutil.copytree(local_comps["iris-species"], extra / "iris-copy")
    cfg = extra / "iris-copy" / "config.yaml"
    cfg.write_text(cfg.read_text().replace("id: iris-species", "id: iris-copy"))
    found = list_local_competitions([extra])
    assert found["iris-copy"] == extra / "iris-copy" and "iris-species" in found
    clash = tmp_path / "clash"
    shutil.copytree(local_comps["iris-species"], clash / "iris-species")
    with pytest.raises(UserError, match="defined twice"):
        list_local_competitions([clash])
    with pytest.raises(UserError, match="no such directory"):
        list_local_competitions([tmp_path / "absent"])


def test_a_relative_competitions_dir_is_recorded_absolute(
    tmp_path: Path, local_comps: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folder travels to the grading step (pickled to a Slurm job, whose cwd may differ)."""
    shutil.copytree(local_comps["iris-species"], tmp_path / "mine" / "iris-copy")
    cfg = tmp_path / "mine" / "iris-copy" / "config.yaml"
    cfg.write_text(cfg.read_text().replace("id: iris-species", "id: iris-copy"))
    monkeypatch.chdir(tmp_path)
    found = list_local_competitions([Path("mine")])
    assert found["iris-copy"] == tmp_path / "mine" / "iris-copy"
    assert all(folder.is_absolute() for folder in found.values())


@pytest.mark.parametrize("comp_id", sorted(SHIPPED))
def test_prepared_layout(tmp_path: Path, local_comps: dict[str, Path], comp_id: str) -> None:
    assert not is_prepared(tmp_path, comp_id)
    prepare_local(comp_id, local_comps[comp_id], tmp_path, seed=0)
    assert is_prepared(tmp_path, comp_id)
    public = tmp_path / comp_id / "prepared" / "public"
    private = tmp_path / comp_id / "prepared" / "private"
    assert sorted(p.name for p in public.iterdir()) == [
        "description.md", "sample_submission.csv", "test.csv", "train.csv",
    ]  # fmt: skip
    assert [p.name for p in private.iterdir()] == ["test.csv"]
    assert not (tmp_path / comp_id / "raw").exists()
    target = TARGETS[comp_id]
    test = pd.read_csv(public / "test.csv")
    answers = pd.read_csv(private / "test.csv")
    sample = pd.read_csv(public / "sample_submission.csv")
    assert target not in test.columns and target in pd.read_csv(public / "train.csv").columns
    assert list(answers.columns) == ["id", target] == list(sample.columns)
    assert test["id"].tolist() == answers["id"].tolist() == sample["id"].tolist()


def test_prepare_is_deterministic_by_seed_and_idempotent(
    tmp_path: Path, local_comps: dict[str, Path]
) -> None:
    comp = local_comps["diabetes-progression"]
    a = prepare_local("diabetes-progression", comp, tmp_path / "a", seed=1)
    b = prepare_local("diabetes-progression", comp, tmp_path / "b", seed=1)
    c = prepare_local("diabetes-progression", comp, tmp_path / "c", seed=2)
    for name in ("public/train.csv", "public/test.csv", "private/test.csv"):
        assert (a / name).read_bytes() == (b / name).read_bytes()
    assert (a / "private/test.csv").read_bytes() != (c / "private/test.csv").read_bytes()
    stamp = (a / "public" / "train.csv").stat().st_mtime_ns
    prepare_local("diabetes-progression", comp, tmp_path / "a", seed=1)
    assert (a / "public" / "train.csv").stat().st_mtime_ns == stamp  # idempotent: not rewritten
    prepare_local("diabetes-progression", comp, tmp_path / "a", seed=2)
    assert (a / "private/test.csv").read_bytes() == (c / "private/test.csv").read_bytes()


def test_folder_without_fetch_raw_uses_user_raw_dir(tmp_path: Path) -> None:
    from gradekit import write_custom_competition

    folder = write_custom_competition(tmp_path / "comps", "rawless", [1.0, 0.0])
    (folder / "prepare.py").write_text(
        "def prepare(raw, public, private):\n"
        "    (public / 'train.csv').write_text((raw / 'data.csv').read_text())\n"
        "    (private / 'test.csv').write_text('id,value\\n1,0\\n')\n"
    )
    from mle_world.errors import ConfigError

    with pytest.raises(ConfigError, match="no fetch_raw"):
        prepare_local("rawless", folder, tmp_path / "data")
    (tmp_path / "data" / "rawless" / "raw").mkdir(parents=True)
    (tmp_path / "data" / "rawless" / "raw" / "data.csv").write_text("id,value\n1,5\n")
    prepared = prepare_local("rawless", folder, tmp_path / "data")
    assert (prepared / "public" / "train.csv").read_text() == "id,value\n1,5\n"


@pytest.mark.parametrize(
    "rows",
    [["1.0", "2.0", "3.0"], ["3.0", "2.0", "1.0"], ["1.0", "2.0", ""], ["", "2.0", "3.0"], ["2.0", "2.0"]],
)
def test_the_agents_metric_direction_is_the_one_medals_are_ranked_by(tmp_path: Path, rows: list[str]) -> None:
    """Rows without a score (Kaggle's hasScore False) are NaN for grading; the agent's hint must agree."""
    board = tmp_path / "leaderboard.csv"
    lines = ["scoreNullable,teamId,hasTeamName,submissionDate,score,hasScore"]
    lines += [f"{s},{i},True,2025-01-01 00:00:00,{s},{bool(s)}" for i, s in enumerate(rows)]
    board.write_text("\n".join(lines) + "\n")
    # Was: True for ["1.0", "2.0", ""] (the empty row skipped) where grading ranks higher-is-better.
    assert leaderboard_direction(board) is is_lower_better(read_leaderboard_scores(board))
