"""Grading in a child process: a grader killed (out of memory) or stuck never takes the launcher with it.

Grades real submissions of real local competitions through real child processes; writes only tmp paths.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from gradekit import spec_for, submit, write_custom_competition

from mle_world.errors import NotPreparedError
from mle_world.grading.grader import MultiGrader
from mle_world.grading.isolation import IsolatedGrader
from mle_world.storage import write_model
from mle_world.tasks.local import prepare_local

pytestmark = pytest.mark.timeout(180)

# The value cell picks the grader's fate: "die" is the OOM killer's SIGKILL, "hang" a grader that never ends.
FATEFUL_GRADE = textwrap.dedent(
    """
    import os, signal, time

    def grade(submission, answers):
        value = str(submission["value"].iloc[0])
        if value == "die":
            os.kill(os.getpid(), signal.SIGKILL)
        if value == "hang":
            time.sleep(3600)
        if value == "print":  # a grader that prints: its output must not be taken for an answer
            print("MLE_WORLD_GRADED {}")
            print("id,value")
            return 0.5
        return float(value)
    """
)


@pytest.fixture
def fateful(tmp_path: Path) -> tuple[dict[str, Path], Path]:
    folder = write_custom_competition(tmp_path / "comps", "fate", [0.9, 0.8, 0.7, 0.6, 0.5])
    (folder / "grade.py").write_text(FATEFUL_GRADE)
    prepare_local("fate", folder, tmp_path / "data")
    return {"fate": folder}, tmp_path / "data"


def test_a_grader_killed_while_grading_leaves_an_invalid_report_and_the_launcher_alive(
    tmp_path: Path, fateful: tuple[dict[str, Path], Path]
) -> None:
    """The launcher's own code path (`grade_output_dir`'s default grader) in a process of its own: a
    grading that was in-process took that process down with the grader."""
    comps, data = fateful
    out = tmp_path / "out"
    for seed, value in ((34, "die"), (35, "0.85")):
        trial = out / "runs" / "wm-point" / f"fate_seed{seed}"
        write_model(trial / "spec.json", spec_for("fate", seed=seed))
        submit(trial / "submission" / "submission.csv", f"id,value\n1,{value}\n")
    script = textwrap.dedent(
        f"""
        import json
        from pathlib import Path
        from mle_world.grading.grader import grade_output_dir
        result = grade_output_dir(Path({str(out)!r}), Path({str(data)!r}), {{"fate": Path({str(comps["fate"])!r})}})
        print(json.dumps([r.model_dump(mode="json") for r in result.graded]))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=150)
    assert done.returncode == 0, done.stderr[-2000:]
    died, fine = json.loads(done.stdout)
    assert (died["score"], died["valid_submission"], died["any_medal"]) == (None, False, False)
    assert died["submission_exists"] is True and died["gold_threshold"] == 0.9
    assert died["submission_path"].endswith("fate_seed34/submission/submission.csv")
    assert died["invalid_reason"] == "grading process killed by SIGKILL (out of memory?)"
    assert (fine["score"], fine["bronze_medal"]) == (0.85, True)  # 5 teams: bronze is row 2
    assert "grading process killed by SIGKILL (out of memory?)" in done.stderr


def test_a_grader_that_never_ends_is_stopped_and_the_submission_is_invalid(
    tmp_path: Path, fateful: tuple[dict[str, Path], Path]
) -> None:
    comps, data = fateful
    with IsolatedGrader(data, comps, timeout_s=3) as grader:
        report = grader.grade("fate", submit(tmp_path / "hang.csv", "id,value\n1,hang\n"))
    assert (report.score, report.valid_submission, report.submission_exists) == (None, False, True)
    assert report.bronze_threshold == 0.8 and report.submission_path == str(tmp_path / "hang.csv")
    assert report.invalid_reason == "no result after 3 s"


def test_a_child_grades_exactly_as_in_process(
    tmp_path: Path, prepared_data: Path, local_comps: dict[str, Path]
) -> None:
    truth = (prepared_data / "diabetes-progression" / "prepared" / "private" / "test.csv").read_text()
    submissions = [
        submit(tmp_path / "perfect.csv", truth),
        submit(tmp_path / "off.csv", truth.replace(".0\n", ".5\n")),
        submit(tmp_path / "header.csv", "id,progression\n"),
        tmp_path / "absent.csv",
    ]
    inproc = MultiGrader(prepared_data, local_comps)
    with IsolatedGrader(prepared_data, local_comps) as isolated:
        for path in submissions:
            a = isolated.grade("diabetes-progression", path).model_dump(exclude={"created_at"})
            b = inproc.grade("diabetes-progression", path).model_dump(exclude={"created_at"})
            assert a == b


def test_unprepared_data_is_still_a_user_error(tmp_path: Path, local_comps: dict[str, Path]) -> None:
    with (
        IsolatedGrader(tmp_path, local_comps) as grader,
        pytest.raises(NotPreparedError, match="answers missing"),
    ):
        grader.grade("iris-species", tmp_path / "s.csv")


def test_one_grading_process_serves_many_submissions_and_is_replaced_when_it_dies(
    tmp_path: Path, fateful: tuple[dict[str, Path], Path]
) -> None:
    comps, data = fateful
    values = ["0.85", "0.95", "die", "0.55", "print"]
    paths = [submit(tmp_path / f"{i}.csv", f"id,value\n1,{v}\n") for i, v in enumerate(values)]
    workers = []
    with IsolatedGrader(data, comps) as grader:
        reports = []
        for path in paths:
            reports.append(grader.grade("fate", path))
            workers.append(grader._worker.pid if grader._worker else None)
    assert [r.score for r in reports] == [0.85, 0.95, None, 0.55, 0.5]
    assert reports[2].invalid_reason == "grading process killed by SIGKILL (out of memory?)"
    assert workers[0] == workers[1] != workers[3] == workers[4]  # one process until it died, then a new one
    assert grader._worker is None and all(not Path(f"/proc/{pid}").exists() for pid in set(workers))
