"""`run_paper.py grade OUTPUT_DIR` regrades against the data dir the sweep ran with (launch.json).

Runs the CLI in real subprocesses (a dry run to write launch.json, then `grade`); writes only tmp paths.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from gradekit import spec_for, submit

from mle_world.storage import write_model

REPO = Path(__file__).resolve().parents[2]


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
