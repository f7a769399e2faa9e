"""MLE-bench's own grader, in process (mlebench importable) or through the python of `MLEBENCH_VENV`.

Reads the submission and MLE-bench's prepared data and leaderboards; writes nothing.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from mle_world.errors import NotPreparedError, UserError
from mle_world.grading.medals import build_report, normalise_score, read_leaderboard_scores
from mle_world.grading.report import CompetitionReport
from mle_world.grading.submission import submission_exists

log = logging.getLogger(__name__)

MLEBENCH_MISSING = "mlebench is not installed; run scripts/install_mlebench.sh"


@contextlib.contextmanager
def _scratch_cwd() -> Iterator[None]:
    """Run inside a temp cwd and undo logging.basicConfig (mlebench's import side effects)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    old = Path.cwd()
    with tempfile.TemporaryDirectory(prefix="mlebench-scratch-") as scratch:
        os.chdir(scratch)
        try:
            yield
        finally:
            os.chdir(old)
            for handler in list(root.handlers):
                if handler not in handlers:
                    root.removeHandler(handler)
            root.setLevel(level)


def import_mlebench() -> dict[str, Any]:
    """Import mlebench lazily in a scratch cwd; UserError with the install hint when absent."""
    try:
        with _scratch_cwd():
            registry_mod = importlib.import_module("mlebench.registry")
            grade_mod = importlib.import_module("mlebench.grade")
    except ImportError as exc:
        if getattr(exc, "name", "") and str(getattr(exc, "name", "")).startswith("mlebench"):
            raise UserError(MLEBENCH_MISSING) from exc
        raise UserError(f"mlebench failed to import ({exc}); run scripts/install_mlebench.sh") from exc
    return {"registry": registry_mod.registry, "grade_csv": grade_mod.grade_csv}


class MLEBenchGrader:
    """Grades with MLE-bench's registry and `grade_csv` (production path)."""

    def __init__(self, data_dir: Path, mlebench: Mapping[str, Any] | None = None) -> None:
        self.data_dir = data_dir
        self._mlebench = dict(mlebench) if mlebench is not None else import_mlebench()

    def grade(self, task: str, submission_path: Path) -> CompetitionReport:
        """Grade via `grade_csv`; a crash inside it still yields an invalid-submission report."""
        registry = self._mlebench["registry"].set_data_dir(self.data_dir)
        try:
            competition = registry.get_competition(task)
        except FileNotFoundError as exc:
            raise UserError(f"unknown MLE-bench competition {task!r}") from exc
        private = self.data_dir / task / "prepared" / "private"
        if not private.is_dir() or not any(private.iterdir()):
            raise NotPreparedError(f"{private}: not prepared; run `mlebench prepare -c {task}`")
        exists = submission_exists(submission_path)
        try:
            with _scratch_cwd():
                raw = self._mlebench["grade_csv"](submission_path, competition).to_dict()
            return _normalise_mlebench_report(raw)
        except Exception as exc:  # noqa: BLE001 - e.g. read_csv of a malformed file inside grade_csv
            log.warning("%s: mlebench grade_csv failed: %s: %s", task, type(exc).__name__, exc)
            scores = read_leaderboard_scores(Path(competition.leaderboard))
            return build_report(task, None, scores, submission_path, exists)


_VENV_SCRIPT = """
import json, os, sys, tempfile
from pathlib import Path
os.chdir(tempfile.mkdtemp(prefix="mlebench-scratch-"))
from mlebench.registry import registry
from mlebench.grade import grade_csv
try:
    comp = registry.set_data_dir(Path(sys.argv[1])).get_competition(sys.argv[2])
except FileNotFoundError:
    print("MLE_WORLD_RESULT " + json.dumps({"unknown": True}))
    sys.exit(0)
try:
    out = {"report": grade_csv(Path(sys.argv[3]), comp).to_dict()}
except Exception as exc:
    out = {"error": f"{type(exc).__name__}: {exc}", "leaderboard": str(comp.leaderboard)}
print("MLE_WORLD_RESULT " + json.dumps(out))
"""


class VenvMLEBenchGrader:
    """MLE-bench installed in a separate venv (`MLEBENCH_VENV`): grades through its python."""

    def __init__(self, data_dir: Path, venv: Path) -> None:
        self.data_dir = data_dir
        self.python = venv / "bin" / "python"
        if not self.python.is_file():
            raise UserError(f"MLEBENCH_VENV={venv}: no bin/python; run scripts/install_mlebench.sh")

    def grade(self, task: str, submission_path: Path) -> CompetitionReport:
        """Run grade_csv in the venv and parse its report; failures yield an invalid report."""
        import json
        import subprocess

        private = self.data_dir / task / "prepared" / "private"
        if not private.is_dir() or not any(private.iterdir()):
            raise NotPreparedError(f"{private}: not prepared; run `mlebench prepare -c {task}`")
        argv = [str(self.python), "-c", _VENV_SCRIPT, str(self.data_dir), task, str(submission_path)]
        done = subprocess.run(argv, capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL)
        line = next((x for x in done.stdout.splitlines() if x.startswith("MLE_WORLD_RESULT ")), None)
        if line is None:
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise UserError(f"mlebench in {self.python.parent.parent} failed: {tail[:300]}")
        result = json.loads(line.split(" ", 1)[1])
        if result.get("unknown"):
            raise UserError(f"unknown MLE-bench competition {task!r}")
        if "report" in result:
            return _normalise_mlebench_report(result["report"])
        log.warning("%s: mlebench grade_csv failed: %s", task, result.get("error"))
        scores = read_leaderboard_scores(Path(result["leaderboard"]))
        return build_report(task, None, scores, submission_path, submission_exists(submission_path))


def _normalise_mlebench_report(raw: dict[str, Any]) -> CompetitionReport:
    """MLE-bench's dict with a NaN/inf score turned into an invalid submission."""
    score = normalise_score(raw["score"]) if raw["score"] is not None else None
    raw = {**raw, "score": score, "valid_submission": score is not None}
    if score is None:
        raw.update(
            any_medal=False, gold_medal=False, silver_medal=False, bronze_medal=False, above_median=False
        )
    return CompetitionReport.model_validate(raw)


def make_mlebench_grader(
    data_dir: Path, env: Mapping[str, str] | None = None
) -> MLEBenchGrader | VenvMLEBenchGrader:
    """In-process MLE-bench when importable, else the `MLEBENCH_VENV` one, else a UserError."""
    environ = os.environ if env is None else env
    try:
        return MLEBenchGrader(data_dir)
    except UserError:
        if environ.get("MLEBENCH_VENV"):
            return VenvMLEBenchGrader(data_dir, Path(environ["MLEBENCH_VENV"]))
        raise
