"""Grade a trial's submission with MLE-bench or the built-in grader for local competitions.

Reads `<trial>/submission/submission.csv`, the task's private answers and its leaderboard; writes
`runs/<configuration>/<task>_seed<seed>_grading_report.json` (MLE-bench's fields + trial fields).
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import math
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import pandas as pd
from pydantic import BaseModel, ConfigDict, ValidationError

from mle_world.errors import NotPreparedError, UserError
from mle_world.records import Regime, TrialSpec
from mle_world.storage import read_model, write_json_atomic

log = logging.getLogger(__name__)

SUBMISSION_RELPATH = Path("submission") / "submission.csv"
MLEBENCH_MISSING = "mlebench is not installed; run scripts/install_mlebench.sh"


class InvalidSubmissionError(Exception):
    """A submission that cannot be graded (wrong columns, ids, NaN); the score becomes null.

    Mirrors `mlebench.grade_helpers.InvalidSubmissionError` so local graders do not need mlebench.
    """


class CompetitionReport(BaseModel):
    """MLE-bench's per-competition report: same fields, names, order and meanings."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    competition_id: str
    score: float | None
    """The grader's score rounded to 5 decimals; null when missing, invalid or not finite."""
    gold_threshold: float
    silver_threshold: float
    bronze_threshold: float
    median_threshold: float
    """Median of all leaderboard scores."""
    any_medal: bool
    gold_medal: bool
    silver_medal: bool
    bronze_medal: bool
    above_median: bool
    """Strictly better than the median."""
    submission_exists: bool
    """The path is a file with suffix .csv."""
    valid_submission: bool
    """The grader returned a finite score."""
    is_lower_better: bool
    """First leaderboard score < last one (a tie counts as higher-is-better)."""
    created_at: datetime
    """Local naive time, like MLE-bench."""
    submission_path: str


class GradingReport(CompetitionReport):
    """`<task>_seed<seed>_grading_report.json`: MLE-bench's fields followed by the trial's identity."""

    trial_id: str
    regime: Regime
    configuration: str
    seed: int


MLEBENCH_REPORT_FIELDS: tuple[str, ...] = tuple(CompetitionReport.model_fields)


class Thresholds(NamedTuple):
    """Medal and median thresholds of a leaderboard."""

    gold: float
    silver: float
    bronze: float
    median: float


class Rank(NamedTuple):
    """Where a score lands on a leaderboard."""

    gold_medal: bool
    silver_medal: bool
    bronze_medal: bool
    above_median: bool


def is_lower_better(scores: Sequence[float]) -> bool:
    """MLE-bench's rule: the first (best) score is below the last one."""
    if len(scores) == 0:
        raise ValueError("Number of teams in leaderboard must be greater than 0.")
    return bool(scores[0] < scores[-1])


def medal_positions(num_teams: int) -> tuple[int, int, int]:
    """1-indexed leaderboard rows of the gold, silver and bronze thresholds (Kaggle progression)."""
    n = num_teams
    if 1 <= n < 100:
        return max(1, int(n * 0.1)), max(1, int(n * 0.2)), max(1, int(n * 0.4))
    if 100 <= n < 250:
        return 10, max(1, int(n * 0.2)), max(1, int(n * 0.4))
    if 250 <= n < 1000:
        return 10 + int(n * 0.002), 50, 100
    if n >= 1000:
        return 10 + int(n * 0.002), max(1, int(n * 0.05)), max(1, int(n * 0.1))
    raise ValueError("Number of teams in leaderboard must be greater than 0.")


def thresholds(scores: Sequence[float]) -> Thresholds:
    """Thresholds of a best-to-worst leaderboard, exactly as MLE-bench's `Grader.rank_score`."""
    gold, silver, bronze = medal_positions(len(scores))
    median = float(pd.Series(list(scores), dtype=float).median())
    return Thresholds(float(scores[gold - 1]), float(scores[silver - 1]), float(scores[bronze - 1]), median)


def rank_score(score: float | None, scores: Sequence[float]) -> tuple[Thresholds, Rank]:
    """Medals (inclusive, mutually exclusive) and above-median (strict) of `score`."""
    th = thresholds(scores)
    if score is None:
        return th, Rank(False, False, False, False)
    lower = is_lower_better(scores)

    def at_least(threshold: float) -> bool:
        return score <= threshold if lower else score >= threshold

    gold = at_least(th.gold)
    silver = not gold and at_least(th.silver)
    bronze = not gold and not silver and at_least(th.bronze)
    above = score < th.median if lower else score > th.median
    return th, Rank(bool(gold), bool(silver), bool(bronze), bool(above))


def normalise_score(raw: Any) -> float | None:
    """MLE-bench's `round(score, 5)`; non-numeric, NaN and infinite scores become None (invalid)."""
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(value):
        return None
    return round(value, 5)


def local_now() -> datetime:
    """Local naive time (MLE-bench's `datetime.now()`)."""
    return datetime.now(UTC).astimezone().replace(tzinfo=None)


def build_report(
    competition_id: str,
    score: float | None,
    leaderboard_scores: Sequence[float],
    submission_path: Path,
    submission_exists: bool,
) -> CompetitionReport:
    """Assemble a report from a (normalised) score and the leaderboard."""
    th, rank = rank_score(score, leaderboard_scores)
    return CompetitionReport(
        competition_id=competition_id,
        score=score,
        gold_threshold=th.gold,
        silver_threshold=th.silver,
        bronze_threshold=th.bronze,
        median_threshold=th.median,
        any_medal=rank.gold_medal or rank.silver_medal or rank.bronze_medal,
        gold_medal=rank.gold_medal,
        silver_medal=rank.silver_medal,
        bronze_medal=rank.bronze_medal,
        above_median=rank.above_median,
        submission_exists=submission_exists,
        valid_submission=score is not None,
        is_lower_better=is_lower_better(leaderboard_scores),
        created_at=local_now(),
        submission_path=str(submission_path),
    )


def read_csv_exact(path: Path) -> pd.DataFrame:
    """`read_csv` with round-trip float parsing (MLE-bench's choice; pandas >= 3 does it by default)."""
    if int(pd.__version__.split(".", 1)[0]) >= 3:
        return pd.read_csv(path)
    return pd.read_csv(path, float_precision="round_trip")


def submission_exists(path: Path) -> bool:
    """MLE-bench's rule: a file whose suffix is .csv."""
    return path.is_file() and path.suffix.lower() == ".csv"


def read_leaderboard_scores(path: Path) -> list[float]:
    """Scores of a Kaggle leaderboard export, best to worst; UserError when unusable."""
    try:
        frame = pd.read_csv(path)
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: cannot read leaderboard ({exc})") from exc
    if "score" not in frame.columns or len(frame) == 0:
        raise UserError(
            f"{path}: leaderboard must have a `score` column and at least one row "
            "(a 3-line file is a git-lfs pointer: run `git lfs pull`)"
        )
    return [float(s) for s in frame["score"]]


# --------------------------------------------------------------------------- helpers for grade.py


def prepare_for_metric(
    submission: pd.DataFrame,
    answers: pd.DataFrame,
    id_column: str,
    target_columns: Sequence[str],
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Check columns, ids and values of a submission; return both frames aligned by id.

    Raises InvalidSubmissionError for missing columns, wrong length, unknown or duplicate ids and
    missing (NaN) predictions.
    """
    required = [id_column, *target_columns]
    missing = [c for c in required if c not in submission.columns]
    if missing:
        raise InvalidSubmissionError(f"missing column(s) {missing}; expected {required}")
    if len(submission) != len(answers):
        raise InvalidSubmissionError(f"expected {len(answers)} rows, got {len(submission)}")
    sub = submission[required].copy()
    ans = answers[required].copy()
    sub[id_column] = sub[id_column].astype(str)
    ans[id_column] = ans[id_column].astype(str)
    if sub[id_column].duplicated().any():
        raise InvalidSubmissionError(f"duplicate values in column {id_column!r}")
    if set(sub[id_column]) != set(ans[id_column]):
        raise InvalidSubmissionError(f"values of {id_column!r} do not match the test set")
    if sub[list(target_columns)].isna().to_numpy().any():
        raise InvalidSubmissionError("submission contains missing (NaN) predictions")
    sub = sub.sort_values(id_column).reset_index(drop=True)
    ans = ans.sort_values(id_column).reset_index(drop=True)
    return sub, ans


# --------------------------------------------------------------------------- graders


class Grader(Protocol):
    """Scores one submission of one task; never raises for a bad submission."""

    def grade(self, task: str, submission_path: Path) -> CompetitionReport:
        """Return MLE-bench's report for `submission_path` (invalid/missing → valid_submission false)."""
        ...


GradeFn = Callable[[pd.DataFrame, Any], Any]


class BuiltinGrader:
    """Grades local competition folders in MLE-bench's format with their own `grade.py`."""

    def __init__(self, competitions: Mapping[str, Path], data_dir: Path) -> None:
        self.competitions = dict(competitions)
        self.data_dir = data_dir

    def grade(self, task: str, submission_path: Path) -> CompetitionReport:
        """Grade with the folder's grade_fn and MLE-bench's medal rules."""
        from mle_world.localcomp import load_answers, load_competition, load_grade_fn

        if task not in self.competitions:
            raise UserError(f"unknown local competition {task!r}")
        comp = load_competition(self.competitions[task])
        answers_path = self.data_dir / comp.answers
        if not answers_path.is_file():
            raise NotPreparedError(
                f"{answers_path}: answers missing; run `run_paper.py prepare --data-dir {self.data_dir}`"
            )
        scores = read_leaderboard_scores(comp.directory / "leaderboard.csv")
        grade_fn = load_grade_fn(comp)
        exists = submission_exists(submission_path)
        score: float | None = None
        if exists:
            score = _call_grade_fn(grade_fn, submission_path, lambda: load_answers(answers_path), task)
        return build_report(comp.id, score, scores, submission_path, exists)


def _call_grade_fn(
    grade_fn: GradeFn, submission_path: Path, answers: Callable[[], Any], task: str
) -> float | None:
    """Run a grader like MLE-bench does: any exception means an invalid submission."""
    try:
        submission = read_csv_exact(submission_path)
        return normalise_score(grade_fn(submission, answers()))
    except InvalidSubmissionError as exc:
        log.warning("%s: invalid submission: %s", task, exc)
    except Exception as exc:  # noqa: BLE001 - MLE-bench treats every grader error as invalid
        log.warning("%s: grading error: %s: %s", task, type(exc).__name__, exc)
    return None


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


def make_mlebench_grader(data_dir: Path, env: Mapping[str, str] | None = None) -> Grader:
    """In-process MLE-bench when importable, else the `MLEBENCH_VENV` one, else a UserError."""
    environ = os.environ if env is None else env
    try:
        return MLEBenchGrader(data_dir)
    except UserError:
        if environ.get("MLEBENCH_VENV"):
            return VenvMLEBenchGrader(data_dir, Path(environ["MLEBENCH_VENV"]))
        raise


def make_grader(task: str, data_dir: Path, local_competitions: Mapping[str, Path]) -> Grader:
    """Built-in grader for local competitions, MLE-bench's (imported lazily) for the rest."""
    if task in local_competitions:
        return BuiltinGrader(local_competitions, data_dir)
    return make_mlebench_grader(data_dir)


class MultiGrader:
    """Picks the built-in or the MLE-bench grader per task; MLE-bench is imported on first use."""

    def __init__(self, data_dir: Path, local_competitions: Mapping[str, Path]) -> None:
        self.data_dir = data_dir
        self.builtin = BuiltinGrader(local_competitions, data_dir)
        self._mlebench: Grader | None = None

    def grade(self, task: str, submission_path: Path) -> CompetitionReport:
        """Dispatch by task id."""
        if task in self.builtin.competitions:
            return self.builtin.grade(task, submission_path)
        if self._mlebench is None:
            self._mlebench = make_mlebench_grader(self.data_dir)
        return self._mlebench.grade(task, submission_path)


# --------------------------------------------------------------------------- trials


def report_path(output_dir: Path, spec: TrialSpec) -> Path:
    """`<output_dir>/runs/<configuration>/<task>_seed<seed>_grading_report.json`."""
    return output_dir / "runs" / spec.configuration / f"{spec.task}_seed{spec.seed}_grading_report.json"


def trial_report_path(trial_dir: Path, spec: TrialSpec) -> Path:
    """The report beside the trial directory (`runs/<configuration>/`)."""
    return trial_dir.parent / f"{spec.task}_seed{spec.seed}_grading_report.json"


def grade_trial(trial_dir: Path, spec: TrialSpec, data_dir: Path, grader: Grader) -> GradingReport:
    """Grade `<trial_dir>/submission/submission.csv` after the agent exited; write the report atomically."""
    core = grader.grade(spec.task, trial_dir / SUBMISSION_RELPATH)
    report = GradingReport(
        **core.model_dump(),
        trial_id=spec.trial_id,
        regime=spec.regime,
        configuration=spec.configuration,
        seed=spec.seed,
    )
    write_json_atomic(trial_report_path(trial_dir, spec), report.model_dump(mode="json"))
    return report


class RegradeResult(NamedTuple):
    """Outcome of `grade_output_dir`."""

    graded: list[GradingReport]
    skipped: list[str]
    """Trial ids whose report already existed (without `force`)."""
    errors: list[str]
    """One line per trial that could not be graded (bad spec.json, not prepared, …)."""


def grade_output_dir(
    output_dir: Path,
    data_dir: Path,
    local_competitions: Mapping[str, Path],
    *,
    force: bool = True,
    grader: Grader | None = None,
) -> RegradeResult:
    """(Re)grade every trial under `<output_dir>/runs/*/*/spec.json`."""
    runs = output_dir / "runs"
    if not runs.is_dir():
        raise UserError(f"{runs}: no such directory (is {output_dir} an --output-dir?)")
    active: Grader = grader if grader is not None else MultiGrader(data_dir, local_competitions)
    graded: list[GradingReport] = []
    skipped: list[str] = []
    errors: list[str] = []
    for spec_path in sorted(runs.glob("*/*/spec.json")):
        trial_dir = spec_path.parent
        try:
            spec = read_model(spec_path, TrialSpec)
        except (OSError, ValidationError, ValueError) as exc:
            errors.append(f"{spec_path}: unreadable spec ({type(exc).__name__})")
            continue
        if not force and trial_report_path(trial_dir, spec).exists():
            skipped.append(spec.trial_id)
            continue
        try:
            graded.append(grade_trial(trial_dir, spec, data_dir, active))
        except UserError as exc:
            errors.append(f"{spec.trial_id}: {exc}")
    return RegradeResult(graded, skipped, errors)
