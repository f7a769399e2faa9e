"""grade_trial / grade_output_dir / MultiGrader, and the MLE-bench grader against a fake mlebench."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from gradekit import spec_for, submit

from mle_world import layout
from mle_world.errors import NotPreparedError, UserError
from mle_world.grading.builtin import BuiltinGrader
from mle_world.grading.grader import MultiGrader, grade_output_dir, grade_trial
from mle_world.grading.mlebench import MLEBENCH_MISSING, MLEBenchGrader, import_mlebench
from mle_world.grading.report import GradingReport
from mle_world.storage import write_model

TS_UTC = datetime(2026, 1, 1, tzinfo=UTC)


def test_grade_trial_without_submission_writes_invalid_report(
    tmp_path: Path, prepared_data: Path, local_comps: dict[str, Path]
) -> None:
    spec = spec_for("diabetes-progression", seed=36)
    trial = tmp_path / "runs" / "wm-point" / "diabetes-progression_seed36"
    trial.mkdir(parents=True)
    report = grade_trial(trial, spec, prepared_data, BuiltinGrader(local_comps, prepared_data))
    assert report.valid_submission is False and report.submission_exists is False
    path = tmp_path / "runs" / "wm-point" / "diabetes-progression_seed36_grading_report.json"
    assert json.loads(path.read_text())["valid_submission"] is False
    assert not list(path.parent.glob(".*.tmp"))  # atomic write leaves no temp file


def test_report_carries_the_trial_final_state(
    tmp_path: Path, prepared_data: Path, local_comps: dict[str, Path]
) -> None:
    spec = spec_for("iris-species", seed=36)
    trial = tmp_path / "runs" / "wm-point" / "iris-species_seed36"
    truth = (prepared_data / "iris-species" / "prepared" / "private" / "test.csv").read_text()
    submit(trial / "submission" / "submission.csv", truth)
    grader = BuiltinGrader(local_comps, prepared_data)
    report = grade_trial(trial, spec, prepared_data, grader, trial_state="failed")
    assert report.trial_state == "failed" and report.valid_submission
    # A regrade reads the final state from status.json.
    (trial / "status.json").write_text(json.dumps({"trial_id": spec.trial_id, "state": "failed"}))
    assert grade_trial(trial, spec, prepared_data, grader).trial_state == "failed"


def test_grade_output_dir_regrades_every_trial(
    tmp_path: Path, prepared_data: Path, local_comps: dict[str, Path]
) -> None:
    out = tmp_path / "out"
    for seed in (34, 35):
        spec = spec_for("iris-species", seed=seed)
        trial = out / "runs" / "wm-point" / f"iris-species_seed{seed}"
        write_model(trial / "spec.json", spec)
        if seed == 34:
            truth = (prepared_data / "iris-species" / "prepared" / "private" / "test.csv").read_text()
            submit(trial / "submission" / "submission.csv", truth)
    (out / "runs" / "wm-point" / "broken_seed1").mkdir()
    (out / "runs" / "wm-point" / "broken_seed1" / "spec.json").write_text("{not json")
    result = grade_output_dir(out, prepared_data, local_comps)
    assert sorted(r.seed for r in result.graded) == [34, 35]
    assert [r.valid_submission for r in sorted(result.graded, key=lambda r: r.seed)] == [True, False]
    assert len(result.errors) == 1 and "broken_seed1" in result.errors[0]
    again = grade_output_dir(out, prepared_data, local_comps, force=False)
    assert again.graded == [] and len(again.skipped) == 2


@pytest.mark.parametrize("live_state", ["submitted", "running"])
def test_grade_output_dir_natural_seed_order_and_running_trials_left_alone(
    tmp_path: Path, prepared_data: Path, local_comps: dict[str, Path], live_state: str
) -> None:
    """A queued or running trial is not graded (its submission may still change); a failed one is, and
    its report says so; one put back to pending has no final state to record."""
    from mle_world.records import TrialStatus

    out = tmp_path / "out"
    states = {10: "failed", 9: live_state, 2: "pending"}
    for seed, state in states.items():
        trial = out / "runs" / "wm-point" / f"iris-species_seed{seed}"
        write_model(trial / "spec.json", spec_for("iris-species", seed=seed))
        trial_id = f"gated/wm-point/iris-species/seed{seed}"
        write_model(trial / "status.json", TrialStatus(trial_id=trial_id, state=state))
    result = grade_output_dir(out, prepared_data, local_comps)
    assert [r.seed for r in result.graded] == [2, 10]  # natural order, not "10" < "2"
    assert [r.trial_state for r in result.graded] == [None, "failed"]
    assert result.unfinished == ["gated/wm-point/iris-species/seed9"]
    assert not (out / "runs" / "wm-point" / "iris-species_seed9_grading_report.json").exists()


def test_scores_are_rounded_like_mlebench_rounds_numpy_values() -> None:
    import numpy as np

    from mle_world.grading.medals import normalise_score

    # MLE-bench applies round(score, 5) to the grader's numpy value; numpy rounds half away in
    # decimal where Python's float rounding sees 0.48779499999...
    assert normalise_score(np.float64(0.487795)) == 0.4878
    assert normalise_score(0.487795) == round(0.487795, 5)
    assert normalise_score(np.float64("inf")) is None and normalise_score(float("nan")) is None
    assert normalise_score("0.5") == 0.5 and normalise_score("x") is None


def test_local_tasks_are_graded_without_mlebench(
    monkeypatch: pytest.MonkeyPatch, prepared_data: Path, local_comps: dict[str, Path], tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "mlebench", None)  # import fails like an absent package
    monkeypatch.setitem(sys.modules, "mlebench.registry", None)
    report = MultiGrader(prepared_data, local_comps).grade("iris-species", tmp_path / "absent.csv")
    assert report.competition_id == "iris-species" and report.submission_exists is False


def test_missing_mlebench_is_one_clear_user_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("MLEBENCH_VENV", raising=False)  # CI exports the one scripts/test.sh installs
    monkeypatch.setitem(sys.modules, "mlebench", None)  # import fails like an absent package
    monkeypatch.setitem(sys.modules, "mlebench.registry", None)
    with pytest.raises(UserError) as info:
        MultiGrader(tmp_path, {}).grade("spooky-author-identification", tmp_path / "s.csv")
    assert str(info.value) == MLEBENCH_MISSING == "mlebench is not installed; run scripts/install_mlebench.sh"


def test_import_mlebench_uses_scratch_cwd_and_undoes_basicconfig(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A fake mlebench with MLE-bench's import side effects (./cache, logging.basicConfig)."""
    pkg = tmp_path / "site" / "mlebench"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "registry.py").write_text(
        "import logging, pathlib\nlogging.basicConfig(level=logging.INFO)\n"
        "pathlib.Path('cache').mkdir()\nregistry = 'REG'\n"
    )
    (pkg / "grade.py").write_text("def grade_csv(path, competition):\n    return None\n")
    (pkg / "data.py").write_text(
        "def is_dataset_prepared(competition, grading_only=False):\n    return True\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.chdir(tmp_path)
    handlers = list(logging.getLogger().handlers)
    mods = import_mlebench()
    assert mods["registry"] == "REG"
    assert not (tmp_path / "cache").exists() and Path.cwd() == tmp_path
    assert logging.getLogger().handlers == handlers
    for name in ("mlebench", "mlebench.registry", "mlebench.grade", "mlebench.data"):
        sys.modules.pop(name, None)


class FakeReport:
    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def to_dict(self) -> dict[str, Any]:
        return dict(self.data)


def fake_mlebench(
    tmp_path: Path, score: Any, crash: bool = False, grade_csv: Any = None, on_get: Any = None
) -> dict[str, Any]:
    """MLE-bench's in-process API: registry, grade_csv and is_dataset_prepared (its grading_only rule)."""
    leaderboard = tmp_path / "leaderboard.csv"
    leaderboard.write_text("score\n0.9\n0.8\n0.7\n")

    def get_competition(task: str) -> SimpleNamespace:
        if on_get is not None:
            on_get()
        private = data_dir[0] / task / "prepared" / "private"
        return SimpleNamespace(
            id=task, leaderboard=leaderboard, private_dir=private, answers=private / "test.csv"
        )

    data_dir: list[Path] = []

    def set_data_dir(d: Path) -> SimpleNamespace:
        data_dir[:] = [d]
        return SimpleNamespace(get_competition=get_competition)

    def is_dataset_prepared(comp: Any, grading_only: bool = False) -> bool:
        assert grading_only
        private = comp.private_dir
        return bool(private.is_dir() and any(private.iterdir()) and comp.answers.is_file())

    def fake_grade_csv(path: Path, comp: Any) -> FakeReport:
        if crash:
            raise ValueError("malformed csv")
        if score is None:  # as MLE-bench's Grader: the grade_fn's error is logged, the score is None
            logging.getLogger("mlebench.grade_helpers").warning("Invalid submission: 3 rows, expected 4")
        return FakeReport(
            {
                "competition_id": "fake-comp", "score": score, "gold_threshold": 0.9,
                "silver_threshold": 0.8, "bronze_threshold": 0.7, "median_threshold": 0.8,
                "any_medal": True, "gold_medal": True, "silver_medal": False, "bronze_medal": False,
                "above_median": True, "submission_exists": True, "valid_submission": True,
                "is_lower_better": False, "created_at": "2024-09-19T20:07:15.123456",
                "submission_path": str(path),
            }
        )  # fmt: skip

    return {
        "registry": SimpleNamespace(set_data_dir=set_data_dir),
        "grade_csv": grade_csv or fake_grade_csv,
        "is_dataset_prepared": is_dataset_prepared,
    }


@pytest.fixture
def prepared_fake(tmp_path: Path) -> Path:
    private = tmp_path / "data" / "fake-comp" / "prepared" / "private"
    private.mkdir(parents=True)
    (private / "test.csv").write_text("id,y\n")
    return tmp_path / "data"


def test_mlebench_grader_passes_report_through(
    tmp_path: Path, prepared_fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    grader = MLEBenchGrader(prepared_fake, fake_mlebench(tmp_path, 0.95))
    report = grader.grade("fake-comp", tmp_path / "s.csv")
    assert report.score == 0.95 and report.gold_medal and report.valid_submission


def test_mlebench_nan_score_becomes_invalid(
    tmp_path: Path, prepared_fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    report = MLEBenchGrader(prepared_fake, fake_mlebench(tmp_path, float("nan"))).grade(
        "fake-comp", tmp_path / "s.csv"
    )
    assert report.score is None and report.valid_submission is False and report.any_medal is False
    assert report.invalid_reason == "the grader's score nan is not a finite number"


def test_mlebench_invalid_submission_says_what_mlebench_logged(
    tmp_path: Path, prepared_fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MLE-bench's report has no reason: its Grader logs the grade_fn's error and returns None."""
    monkeypatch.setattr(logging.getLogger(), "level", logging.ERROR)  # kept whatever the root's level
    report = MLEBenchGrader(prepared_fake, fake_mlebench(tmp_path, None)).grade(
        "fake-comp", tmp_path / "s.csv"
    )
    assert report.valid_submission is False
    assert report.invalid_reason == "mlebench: Invalid submission: 3 rows, expected 4"


def test_mlebench_crash_yields_invalid_report(
    tmp_path: Path, prepared_fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    submit(tmp_path / "s.csv", "garbage")
    report = MLEBenchGrader(prepared_fake, fake_mlebench(tmp_path, 1.0, crash=True)).grade(
        "fake-comp", tmp_path / "s.csv"
    )
    assert report.valid_submission is False and report.submission_exists is True
    assert report.invalid_reason == "mlebench grade_csv failed: ValueError: malformed csv"
    assert (report.gold_threshold, report.silver_threshold, report.bronze_threshold) == (0.9, 0.9, 0.9)
    assert os.getcwd() == str(tmp_path)


def test_mlebench_answers_missing_is_not_prepared_rather_than_an_invalid_submission(
    tmp_path: Path, prepared_fake: Path
) -> None:
    """MLE-bench's grade_csv raises ValueError for unprepared data; it must not become a zero in the paper."""
    (prepared_fake / "fake-comp" / "prepared" / "private" / "test.csv").rename(
        prepared_fake / "fake-comp" / "prepared" / "private" / "other.csv"
    )
    grader = MLEBenchGrader(prepared_fake, fake_mlebench(tmp_path, 1.0, crash=True))
    with pytest.raises(NotPreparedError, match="fake-comp/prepared/private: not prepared"):
        grader.grade("fake-comp", submit(tmp_path / "s.csv", "id,y\n"))


def test_mlebench_grading_leaves_root_logging_alone(
    tmp_path: Path, prepared_fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Importing a competition's grade.py (on get_competition) runs mlebench's logging.basicConfig,
    which would make the launcher (no root handler of its own) print every library's INFO lines."""
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])  # the launcher's root logger: pytest's capture handlers off
    level = root.level
    grader = MLEBenchGrader(
        prepared_fake, fake_mlebench(tmp_path, 0.95, on_get=lambda: logging.basicConfig(level=logging.DEBUG))
    )
    assert grader.grade("fake-comp", tmp_path / "s.csv").valid_submission
    assert (root.handlers, root.level) == ([], level)


def test_mlebench_grading_from_pool_threads_gives_each_its_report(
    tmp_path: Path, prepared_fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The local pool grades from several supervisor threads: one grade must not undo another's setup
    (each call's scratch cwd was restored, when the calls overlapped, into the other's deleted dir)."""
    monkeypatch.chdir(tmp_path)
    first_inside, second_inside, first_done = threading.Event(), threading.Event(), threading.Event()

    def grade_csv(path: Path, comp: Any) -> FakeReport:
        if path.name == "a.csv":
            first_inside.set()
            second_inside.wait(2)  # unserialised, the second call gets in meanwhile ...
        else:
            second_inside.set()
            first_done.wait(2)  # ... and ends after the first
        return base["grade_csv"](path, comp)

    base = fake_mlebench(tmp_path, 0.95)
    grader = MLEBenchGrader(prepared_fake, {**base, "grade_csv": grade_csv})
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(grader.grade, "fake-comp", tmp_path / "a.csv")
        first.add_done_callback(lambda _: first_done.set())
        first_inside.wait(30)
        second = pool.submit(grader.grade, "fake-comp", tmp_path / "b.csv")
        reports = [first.result(timeout=60), second.result(timeout=60)]
    assert [r.valid_submission and r.gold_medal for r in reports] == [True, True]
    assert Path.cwd() == tmp_path


FAKE_REGISTRY = """
from pathlib import Path
from types import SimpleNamespace
LB = Path(__file__).with_name("leaderboard.csv")
class _R:
    def set_data_dir(self, d):
        self.d = d
        return self
    def get_competition(self, cid):
        if cid == "absent":
            raise FileNotFoundError(cid)
        private = self.d / cid / "prepared" / "private"
        return SimpleNamespace(id=cid, leaderboard=LB, private_dir=private, answers=private / "test.csv")
registry = _R()
"""
FAKE_DATA = """
import pathlib
pathlib.Path("cache").mkdir()  # as mlebench.data's diskcache.Cache("cache") at import
def is_dataset_prepared(comp, grading_only=False):
    private = comp.private_dir
    return private.is_dir() and any(private.iterdir()) and comp.answers.is_file()
"""
FAKE_GRADE = """
import math
class _Rep:
    def __init__(self, d):
        self.d = d
    def to_dict(self):
        return self.d
def grade_csv(path, comp):
    text = path.read_text() if path.is_file() else ""
    if "crash" in text:
        raise ValueError("boom")
    score = math.nan if "nan" in text else 0.85
    if "invalid" in text:
        import logging
        logging.getLogger("mlebench.grade_helpers").warning("Invalid submission: no id column")
        score = None
    return _Rep({"competition_id": comp.id, "score": score, "gold_threshold": 0.9, "silver_threshold": 0.8,
                 "bronze_threshold": 0.7, "median_threshold": 0.75, "any_medal": True, "gold_medal": False,
                 "silver_medal": True, "bronze_medal": False, "above_median": True, "submission_exists": True,
                 "valid_submission": True, "is_lower_better": False, "created_at": "2024-01-01T00:00:00",
                 "submission_path": str(path)})
"""


def installed_fake_mlebench(root: Path) -> tuple[Path, str]:
    """A fake mlebench installed as scripts/install_mlebench.sh installs the real one: the package at the
    root of a git checkout, and pip's dist-info (version, direct_url.json of an editable install) on the
    same path. Returns the checkout (to put on sys.path / PYTHONPATH) and its commit."""
    site = root / "mlebench"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text("")
    (site / "registry.py").write_text(FAKE_REGISTRY)
    (site / "grade.py").write_text(FAKE_GRADE)
    (site / "data.py").write_text(FAKE_DATA)
    (site / "leaderboard.csv").write_text("score\n0.9\n0.8\n0.7\n")
    dist = root / "mlebench-0.0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mlebench\nVersion: 0.0.1\n")
    (dist / "direct_url.json").write_text(json.dumps({"url": root.as_uri(), "dir_info": {"editable": True}}))
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    for args in (["init", "-q"], ["add", "mlebench"], ["commit", "-q", "-m", "fake mlebench"]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True)
    return root, head.stdout.strip()


def test_the_mlebench_version_is_recorded_with_each_report(
    tmp_path: Path, prepared_fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In process (mlebench importable): its version and the commit of its checkout are in the report,
    and an edited grader (a checkout that differs from its commit) is told apart from the commit."""
    site, commit = installed_fake_mlebench(tmp_path / "checkout")
    monkeypatch.syspath_prepend(str(site))
    spec = spec_for("fake-comp", seed=34)
    trial = tmp_path / "runs" / "wm-point" / "fake-comp_seed34"
    submit(trial / "submission" / "submission.csv", "id,y\n")
    try:
        report = grade_trial(trial, spec, prepared_fake, MLEBenchGrader(prepared_fake))
        assert report.mlebench_version == f"0.0.1 (git {commit})" and report.score == 0.85
        written = json.loads(layout.report_beside(trial).read_text())
        assert written["mlebench_version"] == f"0.0.1 (git {commit})"
        (site / "mlebench" / "grade.py").write_text(FAKE_GRADE.replace("0.85", "0.95"))
        edited = MLEBenchGrader(prepared_fake).version or ""
        assert edited.startswith(f"0.0.1 (git {commit} with local changes sha256 ") and edited.endswith(")")
    finally:
        for name in ("mlebench", "mlebench.registry", "mlebench.grade", "mlebench.data"):
            sys.modules.pop(name, None)
    # The built-in grader (local competitions) records none; a report written before the field, neither.
    assert GradingReport.model_validate({**written, "mlebench_version": None}).mlebench_version is None
    del written["mlebench_version"]
    assert GradingReport.model_validate(written).mlebench_version is None


def test_grading_through_a_separate_mlebench_venv(
    tmp_path: Path, prepared_fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mle_world.grading.mlebench import VenvMLEBenchGrader, make_mlebench_grader

    site, commit = installed_fake_mlebench(tmp_path / "venv-site")
    site = site / "mlebench"
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    monkeypatch.setenv("PYTHONPATH", str(site.parent))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setitem(sys.modules, "mlebench", None)  # not importable in-process
    monkeypatch.setitem(sys.modules, "mlebench.registry", None)
    grader = make_mlebench_grader(prepared_fake, {"MLEBENCH_VENV": str(venv)})
    assert isinstance(grader, VenvMLEBenchGrader)
    ok = grader.grade("fake-comp", submit(tmp_path / "ok.csv", "id,y\n"))
    assert ok.score == 0.85 and ok.silver_medal and ok.valid_submission
    assert ok.mlebench_version == f"0.0.1 (git {commit})"  # the venv's mlebench, not this process's
    nan = grader.grade("fake-comp", submit(tmp_path / "nan.csv", "nan"))
    assert nan.score is None and not nan.valid_submission and not nan.any_medal
    assert nan.invalid_reason == "the grader's score nan is not a finite number"
    invalid = grader.grade("fake-comp", submit(tmp_path / "invalid.csv", "invalid"))
    assert invalid.invalid_reason == "mlebench: Invalid submission: no id column"
    crash = grader.grade("fake-comp", submit(tmp_path / "crash.csv", "crash"))
    assert not crash.valid_submission and crash.gold_threshold == 0.9
    assert crash.invalid_reason == "mlebench grade_csv failed: ValueError: boom"
    assert crash.mlebench_version == ok.mlebench_version
    with pytest.raises(UserError, match="not prepared"):
        grader.grade("absent", tmp_path / "ok.csv")
    answers = prepared_fake / "fake-comp" / "prepared" / "private" / "test.csv"
    answers.rename(answers.with_name("other.csv"))  # private/ not empty, but no answers file
    with pytest.raises(NotPreparedError, match="fake-comp/prepared/private: not prepared"):
        grader.grade("fake-comp", tmp_path / "ok.csv")
    assert not list((tmp_path / "tmp").iterdir())  # each run's scratch cwd (with mlebench's ./cache) is gone


@pytest.mark.parametrize("journal", ["other-hash", "no-best", "none"])
def test_a_file_that_is_not_the_selected_nodes_submission_is_not_graded(
    tmp_path: Path, prepared_data: Path, local_comps: dict[str, Path], journal: str
) -> None:
    """A planted or stale submission.csv (perfect answers even) scores null, with the reason stated."""
    spec = spec_for("iris-species", seed=34)
    trial = tmp_path / "runs" / "wm-point" / "iris-species_seed34"
    truth = (prepared_data / "iris-species" / "prepared" / "private" / "test.csv").read_text()
    submit(trial / "submission" / "submission.csv", truth, selected=journal != "none")
    if journal == "other-hash":
        submit(trial / "submission" / "submission.csv", truth + "\n")
        (trial / "submission" / "submission.csv").write_text(truth)
    elif journal == "no-best":
        (trial / "journal.json").write_text(json.dumps({"best_node_id": None, "nodes": []}))
    report = grade_trial(trial, spec, prepared_data, BuiltinGrader(local_comps, prepared_data))
    assert report.submission_exists is True and report.valid_submission is False and report.score is None
    assert report.submission_rejected and not report.any_medal
    assert report.invalid_reason == f"not graded: {report.submission_rejected}"


def test_the_selected_nodes_submission_is_graded(
    tmp_path: Path, prepared_data: Path, local_comps: dict[str, Path]
) -> None:
    spec = spec_for("iris-species", seed=34)
    trial = tmp_path / "runs" / "wm-point" / "iris-species_seed34"
    truth = (prepared_data / "iris-species" / "prepared" / "private" / "test.csv").read_text()
    submit(trial / "submission" / "submission.csv", truth)
    report = grade_trial(trial, spec, prepared_data, BuiltinGrader(local_comps, prepared_data))
    assert report.valid_submission is True and report.submission_rejected is None


@pytest.mark.parametrize("kept", ["whole", "damaged", "absent"])
def test_a_promotion_cut_short_grades_the_selected_nodes_kept_copy(
    tmp_path: Path, prepared_data: Path, local_comps: dict[str, Path], kept: str
) -> None:
    """A kill between the agent copying a new best's file into place and its checkpoint naming that node
    (no resume to restore it): the journal's best is graded from the copy the agent kept of it."""
    spec = spec_for("iris-species", seed=34)
    trial = tmp_path / "runs" / "wm-point" / "iris-species_seed34"
    truth = (prepared_data / "iris-species" / "prepared" / "private" / "test.csv").read_text()
    graded = submit(trial / "submission" / "submission.csv", truth)  # the journal names node n1
    copy = layout.kept_submission(trial, "n1")
    copy.parent.mkdir(parents=True)
    if kept != "absent":
        copy.write_text(truth if kept == "whole" else truth[:-20])
    graded.write_text(truth.splitlines()[0] + "\n")  # the next node's, never checkpointed
    report = grade_trial(trial, spec, prepared_data, BuiltinGrader(local_comps, prepared_data))
    if kept == "whole":
        assert report.submission_rejected is None and report.valid_submission is True
        assert report.score == 1.0 and report.submission_path == str(copy)
    else:
        assert report.submission_rejected and report.score is None and not report.valid_submission


def test_a_node_id_that_is_a_path_is_not_followed_to_a_kept_copy(
    tmp_path: Path, prepared_data: Path, local_comps: dict[str, Path]
) -> None:
    spec = spec_for("iris-species", seed=34)
    trial = tmp_path / "runs" / "wm-point" / "iris-species_seed34"
    truth = (prepared_data / "iris-species" / "prepared" / "private" / "test.csv").read_text()
    digest = hashlib.sha256(truth.encode()).hexdigest()
    node = {"id": "../../elsewhere", "step": 0, "stage": "draft", "submission_sha256": digest}
    submit(trial / "submission" / "submission.csv", truth.splitlines()[0] + "\n", selected=False)
    (trial / "journal.json").write_text(json.dumps({"best_node_id": node["id"], "nodes": [node]}))
    (trial / "elsewhere.submission.csv").write_text(truth)  # where logs/nodes/../../<id> would point
    report = grade_trial(trial, spec, prepared_data, BuiltinGrader(local_comps, prepared_data))
    assert report.submission_rejected and report.score is None


def test_costs_that_cannot_be_written_leave_no_report_saying_succeeded(
    tmp_path: Path, prepared_data: Path, local_comps: dict[str, Path]
) -> None:
    """The post-trial step accounts costs before grading: when accounting fails (the trial then fails
    as infra), no grading report records the trial as succeeded."""
    from mle_world.launch.post_trial import TrialFinisher
    from mle_world.plan.sweep import PlannedTrial

    spec = spec_for("iris-species", seed=34)
    trial_dir = tmp_path / "runs" / "wm-point" / "iris-species_seed34"
    truth = (prepared_data / "iris-species" / "prepared" / "private" / "test.csv").read_text()
    submit(trial_dir / "submission" / "submission.csv", truth)
    bad_prices = tmp_path / "prices.yaml"
    bad_prices.write_text("[not, a, mapping]\n")
    base = prepared_data / "iris-species" / "prepared"
    trial = PlannedTrial(spec, trial_dir, base / "public", base / "private")
    finisher = TrialFinisher(tmp_path, prepared_data, bad_prices, grade=True, local_competitions=local_comps)
    with pytest.raises(UserError, match="prices.yaml"):
        finisher(trial, "succeeded")
    assert not list(tmp_path.glob("runs/*/*_grading_report.json"))


def test_a_launch_with_grade_records_the_mlebench_it_checked_and_a_change_of_it_is_named(
    tmp_path: Path, prepared_fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The launch's grading check runs in the grading process (as every grading does): what it returns goes
    into launch.json's provenance, so a resume graded by another MLE-bench is a provenance change."""
    from mle_world.grading.isolation import IsolatedGrader
    from mle_world.identity import provenance_changes
    from mle_world.records import LaunchProvenance

    site, commit = installed_fake_mlebench(tmp_path / "checkout")
    monkeypatch.setenv("PYTHONPATH", str(site))
    with IsolatedGrader(prepared_fake, {}) as grader:
        checked = grader.check(["fake-comp"])
    assert checked == f"0.0.1 (git {commit})"
    with IsolatedGrader(prepared_fake, {}) as grader:  # local competitions only: no MLE-bench graded
        assert grader.check([]) is None
    before = LaunchProvenance(created_at=TS_UTC, harness_version="1", git_sha="a", mlebench_version=checked)
    after = before.model_copy(update={"mlebench_version": "0.0.1 (git 0000000)"})
    assert provenance_changes(before, after) == [f"MLE-bench {checked} -> 0.0.1 (git 0000000)"]
    # A launch without --grade records none: not a change of grader.
    assert provenance_changes(before, before.model_copy(update={"mlebench_version": None})) == []
