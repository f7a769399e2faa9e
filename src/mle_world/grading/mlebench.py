"""MLE-bench's own grader, in process (mlebench importable) or through the python of `MLEBENCH_VENV`.

Reads the submission and MLE-bench's prepared data and leaderboards; writes nothing.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import os
import tempfile
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from mle_world.errors import GraderUnavailableError, NotPreparedError, UserError
from mle_world.grading.medals import (
    build_report,
    lfs_pointer_message,
    normalise_score,
    not_finite_reason,
    read_leaderboard_scores,
    refuse_lfs_pointer,
)
from mle_world.grading.mlebench_version import SOURCE_CODE, describe, installed_source
from mle_world.grading.report import GraderReport
from mle_world.grading.submission import missing_reason, submission_exists

log = logging.getLogger(__name__)

MLEBENCH_MISSING = "mlebench is not installed; run scripts/install_mlebench.sh"


_LOCK = threading.Lock()
"""Serialises in-process MLE-bench calls: the local pool grades from several supervisor threads, and
both the import's scratch cwd (process-wide) and the undoing of logging.basicConfig must not interleave."""


@contextlib.contextmanager
def _root_logging_kept() -> Iterator[None]:
    """Undo what mlebench does to the root logger: every module it imports (the competitions' grade.py
    too, on `get_competition`) calls `logging.basicConfig`, which would make the launcher print every
    library's INFO lines."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        for handler in list(root.handlers):
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)


@contextlib.contextmanager
def _scratch_cwd() -> Iterator[None]:
    """Run inside a temp cwd (importing mlebench.data creates ./cache) and keep root logging as it was."""
    old = Path.cwd()
    with _root_logging_kept(), tempfile.TemporaryDirectory(prefix="mlebench-scratch-") as scratch:
        os.chdir(scratch)
        try:
            yield
        finally:
            os.chdir(old)


class _Said(logging.Handler):
    """What MLE-bench logs while grading: its Grader logs the error that made a submission invalid (and
    returns None), grade_csv a path that is no CSV file; its report keeps neither."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def _mlebench_says() -> Iterator[list[str]]:
    logger = logging.getLogger("mlebench")  # its modules log through get_logger(__name__)
    said, level = _Said(), logger.level
    logger.addHandler(said)
    logger.setLevel(logging.WARNING)  # whatever the root's level: its warnings are what we keep
    try:
        yield said.messages
    finally:
        logger.removeHandler(said)
        logger.setLevel(level)


def import_mlebench() -> dict[str, Any]:
    """Import mlebench lazily in a scratch cwd; UserError with the install hint when absent."""
    try:
        with _LOCK, _scratch_cwd():
            registry_mod = importlib.import_module("mlebench.registry")
            grade_mod = importlib.import_module("mlebench.grade")
            data_mod = importlib.import_module("mlebench.data")
            package = importlib.import_module("mlebench")
    except ImportError as exc:
        if getattr(exc, "name", "") and str(getattr(exc, "name", "")).startswith("mlebench"):
            raise GraderUnavailableError(MLEBENCH_MISSING) from exc
        raise GraderUnavailableError(
            f"mlebench failed to import ({exc}); run scripts/install_mlebench.sh"
        ) from exc
    return {
        "registry": registry_mod.registry,
        "grade_csv": grade_mod.grade_csv,
        "is_dataset_prepared": data_mod.is_dataset_prepared,
        "version": describe(installed_source(getattr(package, "__file__", None))),
    }


def _not_prepared(task: str, private: Path) -> NotPreparedError:
    return NotPreparedError(
        f"{private}: not prepared (MLE-bench needs a non-empty private/ holding the answers file); "
        f"run `mlebench prepare -c {task}`"
    )


class MLEBenchGrader:
    """Grades with MLE-bench's registry and `grade_csv` (production path)."""

    def __init__(self, data_dir: Path, mlebench: Mapping[str, Any] | None = None) -> None:
        self.data_dir = data_dir
        self._mlebench = dict(mlebench) if mlebench is not None else import_mlebench()
        self.version: str | None = self._mlebench.get("version")
        """What `import_mlebench` found (`mlebench_version.describe`), recorded with every report."""

    def grade(self, task: str, submission_path: Path) -> GraderReport:
        """Grade via `grade_csv`; a crash inside it still yields an invalid-submission report.

        Data that MLE-bench does not count as prepared (its own `is_dataset_prepared`: a private/
        without the answers file, say) raises NotPreparedError before grading: grade_csv's ValueError
        for it must not be taken for a malformed submission."""
        exists = submission_exists(submission_path)
        with _LOCK, _root_logging_kept():
            registry = self._mlebench["registry"].set_data_dir(self.data_dir)
            try:
                competition = registry.get_competition(task)
            except FileNotFoundError as exc:
                raise UserError(f"unknown MLE-bench competition {task!r}") from exc
            if not self._mlebench["is_dataset_prepared"](competition, grading_only=True):
                raise _not_prepared(task, Path(competition.private_dir))
            refuse_lfs_pointer(Path(competition.leaderboard))
            raw, crash = None, None
            with _mlebench_says() as said:
                try:
                    raw = self._mlebench["grade_csv"](submission_path, competition).to_dict()
                except Exception as exc:  # noqa: BLE001 - e.g. read_csv of a malformed file inside grade_csv
                    crash = f"mlebench grade_csv failed: {type(exc).__name__}: {exc}"
                    log.warning("%s: %s", task, crash)
        if raw is not None:
            return _normalise_mlebench_report(raw, said, self.version)
        scores = read_leaderboard_scores(Path(competition.leaderboard))
        report = build_report(task, None, scores, submission_path, exists, crash)
        return report.model_copy(update={"mlebench_version": self.version})


_VENV_SCRIPT = (
    SOURCE_CODE
    + """
import atexit, json, os, sys, tempfile
from pathlib import Path
scratch = tempfile.TemporaryDirectory(prefix="mlebench-scratch-")
atexit.register(scratch.cleanup)
os.chdir(scratch.name)
from mlebench.registry import registry
from mlebench.grade import grade_csv
from mlebench.data import is_dataset_prepared
try:
    comp = registry.set_data_dir(Path(sys.argv[1])).get_competition(sys.argv[2])
except FileNotFoundError:
    print("MLE_WORLD_RESULT " + json.dumps({"unknown": True}))
    sys.exit(0)
if not is_dataset_prepared(comp, grading_only=True):
    print("MLE_WORLD_RESULT " + json.dumps({"not_prepared": str(comp.private_dir)}))
    sys.exit(0)
try:
    with open(comp.leaderboard, "rb") as board:
        pointer = board.read(40) == b"version https://git-lfs.github.com/spec/"
except OSError:
    pointer = False  # grade_csv says what is wrong with it
if pointer:
    print("MLE_WORLD_RESULT " + json.dumps({"lfs_pointer": str(comp.leaderboard)}))
    sys.exit(0)
import logging
class Said(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []
    def emit(self, record):
        self.messages.append(record.getMessage())
said = Said()
logging.getLogger("mlebench").addHandler(said)
logging.getLogger("mlebench").setLevel(logging.WARNING)
try:
    out = {"report": grade_csv(Path(sys.argv[3]), comp).to_dict()}
except Exception as exc:
    out = {"error": f"{type(exc).__name__}: {exc}", "leaderboard": str(comp.leaderboard)}
out["said"] = said.messages
out["source"] = source
print("MLE_WORLD_RESULT " + json.dumps(out))
"""
)


class VenvMLEBenchGrader:
    """MLE-bench installed in a separate venv (`MLEBENCH_VENV`): grades through its python."""

    def __init__(self, data_dir: Path, venv: Path) -> None:
        self.data_dir = data_dir
        self.python = venv / "bin" / "python"
        self._versions: dict[str, str] = {}
        if not self.python.is_file():
            raise GraderUnavailableError(
                f"MLEBENCH_VENV={venv}: no bin/python; run scripts/install_mlebench.sh"
            )

    def grade(self, task: str, submission_path: Path) -> GraderReport:
        """Run grade_csv in the venv and parse its report; failures yield an invalid report."""
        import subprocess

        private = self.data_dir / task / "prepared" / "private"
        if not private.is_dir() or not any(private.iterdir()):
            raise _not_prepared(task, private)
        argv = [str(self.python), "-c", _VENV_SCRIPT, str(self.data_dir), task, str(submission_path)]
        done = subprocess.run(argv, capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL)
        line = next((x for x in done.stdout.splitlines() if x.startswith("MLE_WORLD_RESULT ")), None)
        if line is None:
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise GraderUnavailableError(f"mlebench in {self.python.parent.parent} failed: {tail[:300]}")
        result = json.loads(line.split(" ", 1)[1])
        if result.get("unknown"):
            raise UserError(f"unknown MLE-bench competition {task!r}")
        if result.get("not_prepared"):
            raise _not_prepared(task, Path(result["not_prepared"]))
        if result.get("lfs_pointer"):
            raise UserError(lfs_pointer_message(Path(result["lfs_pointer"])))
        version = self._version(result.get("source") or {})
        if "report" in result:
            return _normalise_mlebench_report(result["report"], result.get("said") or [], version)
        crash = f"mlebench grade_csv failed: {result.get('error')}"
        log.warning("%s: %s", task, crash)
        scores = read_leaderboard_scores(Path(result["leaderboard"]))
        report = build_report(task, None, scores, submission_path, submission_exists(submission_path), crash)
        return report.model_copy(update={"mlebench_version": version})

    def _version(self, source: dict[str, str | None]) -> str:
        """`describe` of what the venv's python said of its mlebench (git runs once per source)."""
        key = json.dumps(source, sort_keys=True)
        if key not in self._versions:
            self._versions[key] = describe(source)
        return self._versions[key]


def _normalise_mlebench_report(raw: dict[str, Any], said: list[str], version: str | None) -> GraderReport:
    """MLE-bench's dict with a NaN/inf score turned into an invalid submission, and why it is invalid
    (the last thing MLE-bench logged while grading it)."""
    original = raw["score"]
    score = normalise_score(original) if original is not None else None
    raw = {**raw, "score": score, "valid_submission": score is not None}
    reason = None
    if score is None:
        raw.update(
            any_medal=False, gold_medal=False, silver_medal=False, bronze_medal=False, above_median=False
        )
        if raw["submission_exists"] is False:
            reason = missing_reason(Path(raw["submission_path"]))
        elif original is not None:
            reason = not_finite_reason(original)
        else:
            reason = f"mlebench: {said[-1]}" if said else "mlebench gave no score"
    return GraderReport.model_validate({**raw, "invalid_reason": reason, "mlebench_version": version})


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
