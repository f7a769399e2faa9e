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

from gradekit import spec_for, submit

from mle_world.storage import write_model

REPO = Path(__file__).resolve().parents[2]
Make = Callable[[str, Sequence[float]], tuple[dict[str, Path], Path]]


def cli(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    # An empty cache: the default data dir (~/.cache/mle-bench/data) holds no answers.
    env = {**os.environ, "XDG_CACHE_HOME": str(home / "cache"), "HOME": str(home)}
    return subprocess.run(
        [sys.executable, str(REPO / "run_paper.py"), *args],
        cwd=REPO,
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

    proc = cli("grade", str(out), home=tmp_path)
    # Was: "answers missing" under ~/.cache/mle-bench/data, exit 1, no report.
    assert proc.returncode == 0, proc.stderr
    report = json.loads((out / "runs" / "aide" / "iris-species_seed34_grading_report.json").read_text())
    assert report["valid_submission"] is True


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
