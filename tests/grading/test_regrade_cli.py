"""`run_paper.py grade OUTPUT_DIR` regrades against the data dir the sweep ran with (launch.json).

Runs the CLI in real subprocesses (a dry run to write launch.json, then `grade`); writes only tmp paths.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from gradekit import spec_for, submit

from mle_world.audit.cache import stamp_of
from mle_world.audit.digest import write_trial_digest
from mle_world.audit.digest_files import gathered_trials
from mle_world.audit.report_view import encode, read_report
from mle_world.grading.grader import MultiGrader, grade_trial
from mle_world.layout import GATHERED_DIGESTS, cost_path, digest_beside
from mle_world.storage import write_model

REPO = Path(__file__).resolve().parents[2]
Make = Callable[[str, Sequence[float]], tuple[dict[str, Path], Path]]


def cli(
    *args: str, home: Path, env: dict[str, str] | None = None, cwd: Path = REPO
) -> subprocess.CompletedProcess[str]:
    # An empty cache: the default data dir (~/.cache/mle-bench/data) holds no answers.
    env = {**(os.environ if env is None else env), "XDG_CACHE_HOME": str(home / "cache"), "HOME": str(home)}
    return subprocess.run(
        [sys.executable, str(REPO / "run_paper.py"), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_grade_uses_the_sweeps_data_dir(tmp_path: Path, prepared_data: Path) -> None:
    out = tmp_path / "out"
    dry = cli(
        *("--config", "configs/demo.yaml", "--runtime", "process", "--regime", "gated"),
        *("--tasks", "iris-species", "--configs", "aide", "--data-dir", str(prepared_data)),
        *("--output-dir", str(out), "--dry-run", "--summary"),
        home=tmp_path,
    )
    assert dry.returncode == 0, dry.stderr
    trial = out / "runs" / "aide" / "iris-species_seed34"
    write_model(trial / "spec.json", spec_for("iris-species", seed=34, configuration="aide"))
    truth = (prepared_data / "iris-species" / "prepared" / "private" / "test.csv").read_text()
    submit(trial / "submission" / "submission.csv", truth)
    write_trial_digest(trial, None)  # as the trial's end left it: no report yet

    proc = cli("grade", str(out), home=tmp_path)
    # Was: "answers missing" under ~/.cache/mle-bench/data, exit 1, no report.
    assert proc.returncode == 0, proc.stderr
    path = out / "runs" / "aide" / "iris-species_seed34_grading_report.json"
    report = json.loads(path.read_text())
    assert report["valid_submission"] is True
    # The trial's digest was written again: it holds the new report and cost CSV, as they are.
    digest = json.loads(digest_beside(trial).read_text())
    assert digest["report"] == [stamp_of(str(path)), encode(read_report(path.read_text()))]
    assert digest["cost"][0] == stamp_of(str(cost_path(out, "aide", "iris-species", 34)))
    # And gathered again, as the launch gathers its trials' digests when it ends.
    assert gathered_trials(trial.parent / GATHERED_DIGESTS) == {trial.name: digest}


def test_grade_finds_the_sweeps_own_local_competitions(tmp_path: Path, custom_competition: Make) -> None:
    comps, data = custom_competition("value-comp", [3.0, 2.0, 1.0])
    out = tmp_path / "out"
    dry = cli(
        *("-c", "value-comp", "-m", "aide", "--config", "configs/demo.yaml", "--runtime", "process"),
        *("--competitions-dir", str(comps["value-comp"].parent), "--data-dir", str(data)),
        *("--output-dir", str(out), "--dry-run"),
        home=tmp_path,
    )
    assert dry.returncode == 0, dry.stderr
    trial = out / "runs" / "aide" / "value-comp_seed34"
    write_model(trial / "spec.json", spec_for("value-comp", seed=34, configuration="aide"))
    submit(trial / "submission" / "submission.csv", "id,value\n1,2.5\n")

    proc = cli("grade", str(out), home=tmp_path)
    # Was: "mlebench is not installed" unless --competitions-dir was given again.
    assert proc.returncode == 0, proc.stderr
    report = json.loads((out / "runs" / "aide" / "value-comp_seed34_grading_report.json").read_text())
    assert report["score"] == 2.5


def absent_mlebench(home: Path) -> dict[str, str]:
    """An environment where `import mlebench` fails as when it is not installed (whatever this machine has)."""
    stub = home / "no-mlebench" / "mlebench"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'mlebench'\", name='mlebench')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "MLEBENCH_VENV"}
    return {**env, "PYTHONPATH": str(stub.parent)}


def prepared_mlebench_task(data: Path, task: str) -> None:
    for part in ("public", "private"):
        (data / task / "prepared" / part).mkdir(parents=True)
        (data / task / "prepared" / part / "test.csv").write_text("PassengerId,Transported\n")


def test_grade_without_mlebench_is_one_line_exit_2(tmp_path: Path) -> None:
    data, out = tmp_path / "data", tmp_path / "out"
    prepared_mlebench_task(data, "spaceship-titanic")
    env = absent_mlebench(tmp_path)
    dry = cli(
        *("--config", "configs/demo.yaml", "--runtime", "process", "--regime", "gated", "--dry-run"),
        *("-c", "spaceship-titanic", "-m", "aide", "--data-dir", str(data), "--output-dir", str(out)),
        home=tmp_path,
        env=env,
    )
    assert dry.returncode == 0, dry.stderr
    for seed in (34, 35):
        trial = out / "runs" / "aide" / f"spaceship-titanic_seed{seed}"
        write_model(trial / "spec.json", spec_for("spaceship-titanic", seed=seed, configuration="aide"))
        submit(trial / "submission" / "submission.csv", "PassengerId,Transported\n")
    proc = cli("grade", str(out), home=tmp_path, env=env)
    # Was: exit 1 after one "error: <trial>: mlebench is not installed" line per trial.
    assert proc.returncode == 2, proc.stderr
    assert (
        proc.stderr.strip()
        == "run_paper.py: error: mlebench is not installed; run scripts/install_mlebench.sh"
    )
    assert not list(out.glob("runs/*/*_grading_report.json"))


@pytest.mark.parametrize("problem", ["no-mlebench", "lfs-pointer"])
def test_a_sweep_with_grade_refuses_to_start_when_its_tasks_cannot_be_graded(
    tmp_path: Path, custom_competition: Make, problem: str
) -> None:
    """Checked before any trial runs: the trials' post-trial grading failed only after 12 hours each."""
    out = tmp_path / "out"
    if problem == "no-mlebench":
        data = tmp_path / "data"
        prepared_mlebench_task(data, "spaceship-titanic")
        env, task, extra = absent_mlebench(tmp_path), "spaceship-titanic", []
        expected = "mlebench is not installed; run scripts/install_mlebench.sh"
    else:
        comps, data = custom_competition("value-comp", [3.0, 2.0, 1.0])
        pointer = "version https://git-lfs.github.com/spec/v1\noid sha256:00\nsize 12\n"
        (comps["value-comp"] / "leaderboard.csv").write_text(pointer)
        env, task = dict(os.environ), "value-comp"
        extra = ["--competitions-dir", str(comps["value-comp"].parent)]
        expected = "run `git lfs pull`"
    proc = cli(
        *("--config", "configs/demo.yaml", "--runtime", "process", "--regime", "gated", "--grade"),
        *("-c", task, "-m", "aide", "--data-dir", str(data), "--output-dir", str(out), *extra),
        *("--no-endpoint-check", "--gpu-device", "none"),  # no GPU preflight before the grading check
        home=tmp_path,
        env=env,
    )
    assert proc.returncode == 2, (proc.stdout[-2000:], proc.stderr[-2000:])
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and expected in lines[0] and "Traceback" not in proc.stderr, proc.stderr
    assert not (out / "launch.json").exists() and not list(out.glob("runs/*/*/status.json"))


def test_a_regrade_from_a_relative_output_dir_gives_the_launchers_report(
    tmp_path: Path, prepared_data: Path, local_comps: dict[str, Path]
) -> None:
    out = tmp_path / "out"
    dry = cli(
        *("--config", "configs/demo.yaml", "--runtime", "process", "--regime", "gated"),
        *("--tasks", "iris-species", "--configs", "aide", "--data-dir", str(prepared_data)),
        *("--output-dir", str(out), "--dry-run", "--summary"),
        home=tmp_path,
    )
    assert dry.returncode == 0, dry.stderr
    trial = out / "runs" / "aide" / "iris-species_seed34"
    spec = spec_for("iris-species", seed=34, configuration="aide")
    write_model(trial / "spec.json", spec)
    truth = (prepared_data / "iris-species" / "prepared" / "private" / "test.csv").read_text()
    submit(trial / "submission" / "submission.csv", truth)
    (trial / "status.json").write_text(json.dumps({"trial_id": spec.trial_id, "state": "succeeded"}))
    path = out / "runs" / "aide" / "iris-species_seed34_grading_report.json"
    # What the launcher's post-trial step writes (its trial dirs are absolute).
    grade_trial(trial, spec, prepared_data, MultiGrader(prepared_data, local_comps), trial_state="succeeded")
    first = json.loads(path.read_text())

    proc = cli("grade", "out", home=tmp_path, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    again = json.loads(path.read_text())
    # Was: submission_path "out/runs/aide/iris-species_seed34/submission/submission.csv".
    assert {k: v for k, v in again.items() if k != "created_at"} == {
        k: v for k, v in first.items() if k != "created_at"
    }
