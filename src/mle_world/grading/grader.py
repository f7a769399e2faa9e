"""Grade a trial's submission with MLE-bench or the built-in grader for local competitions.

Reads `<trial>/submission/submission.csv`, the task's private answers and its leaderboard; writes
`runs/<configuration>/<task>_seed<seed>_grading_report.json` (MLE-bench's fields + trial fields).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Literal, NamedTuple

from mle_world import layout
from mle_world.agent import file_sha256, load_journal_data
from mle_world.errors import GraderUnavailableError, UserError
from mle_world.grading.isolation import IsolatedGrader
from mle_world.grading.multi import Grader as Grader
from mle_world.grading.multi import MultiGrader as MultiGrader
from mle_world.grading.report import GradingReport
from mle_world.records import TrialSpec, TrialStatus
from mle_world.storage import Unreadable, load_record, write_json_atomic

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- trials


def selected_submission(trial_dir: Path) -> tuple[Path, str | None]:
    """The file to grade, and why it is not the selected node's submission (None when it is, or absent).

    The agent copies the best node's file to `submission/submission.csv` itself and records its sha256
    on the node; anything else in that place (a stale or planted file) is not graded. A kill between
    the agent promoting a node and its checkpoint naming it leaves the new node's file there while the
    journal still names the one before, whose kept copy the agent restores on a resume; without a
    resume, that kept copy (when whole) is what is graded.
    """
    path = trial_dir / layout.SUBMISSION_RELPATH
    if not path.is_file():
        return path, None
    digest = file_sha256(path)
    try:
        journal = load_journal_data(layout.TrialFiles(trial_dir).journal)
    except (OSError, ValueError):
        return path, "no journal names the node it came from"
    best = journal.get("best_node_id")
    nodes = journal.get("nodes") or []
    node = next((n for n in nodes if isinstance(n, dict) and n.get("id") == best), None)
    if not isinstance(best, str) or node is None:
        return path, "no node was selected as best"
    expected = node.get("submission_sha256")
    if expected == digest:
        return path, None
    if layout.is_node_id(best):
        kept = layout.kept_submission(trial_dir, best)
        if kept.is_file() and file_sha256(kept) == expected:
            log.warning("%s: the graded file is not node %s's; its kept copy is graded", trial_dir, best[:8])
            return kept, None
    return path, f"its sha256 {digest[:12]} is not that of node {best[:8]}'s submission"


_REJECTED = {
    "score": None,
    "valid_submission": False,
    "any_medal": False,
    "gold_medal": False,
    "silver_medal": False,
    "bronze_medal": False,
    "above_median": False,
}


def grade_trial(
    trial_dir: Path,
    spec: TrialSpec,
    data_dir: Path,
    grader: Grader,
    trial_state: Literal["succeeded", "failed"] | None = None,
) -> GradingReport:
    """Grade `<trial_dir>/submission/submission.csv` after the agent exited; write the report atomically.

    `trial_state` None: read it from the trial's status.json when final (a regrade). The report records
    status.json's `attempt`, so a rerun of the trial supersedes it (the audit stops counting it)."""
    status = _status(trial_dir)
    graded, rejected = selected_submission(trial_dir)
    core = grader.grade(spec.task, graded)
    if rejected is not None:
        log.warning("%s: submission not graded: %s", spec.trial_id, rejected)
        core = core.model_copy(update={**_REJECTED, "invalid_reason": f"not graded: {rejected}"})
    report = GradingReport(
        **core.model_dump(exclude={"invalid_reason", "mlebench_version"}),
        trial_id=spec.trial_id,
        regime=spec.regime,
        configuration=spec.configuration,
        seed=spec.seed,
        trial_state=trial_state if trial_state is not None else _final_state(status),
        submission_rejected=rejected,
        invalid_reason=core.invalid_reason,
        attempt=status.attempt if status is not None else None,
        mlebench_version=core.mlebench_version,
    )
    write_json_atomic(layout.report_beside(trial_dir), report.model_dump(mode="json"))
    return report


def _status(trial_dir: Path) -> TrialStatus | None:
    """The trial's status.json (its attempt names the run that left the graded file); None when unreadable."""
    status = load_record(layout.TrialFiles(trial_dir).status, TrialStatus)
    return None if isinstance(status, Unreadable) else status


def _final_state(status: TrialStatus | None) -> Literal["succeeded", "failed"] | None:
    state = status.state if status is not None else None
    return state if state == "succeeded" or state == "failed" else None


class RegradeResult(NamedTuple):
    """Outcome of `grade_output_dir`."""

    graded: list[GradingReport]
    skipped: list[str]
    """Trial ids whose report already existed (without `force`)."""
    errors: list[str]
    """One line per trial that could not be graded (bad spec.json, not prepared, …)."""
    unfinished: list[str] = []
    """Trial ids still submitted or running: their submission may change, so they are not graded."""


def _is_active(trial_dir: Path) -> bool:
    """status.json says submitted/running (a live sweep); a missing or unreadable one does not block."""
    status = load_record(layout.TrialFiles(trial_dir).status, TrialStatus)
    return not isinstance(status, Unreadable) and status.state in ("submitted", "running")


def grade_output_dir(
    output_dir: Path,
    data_dir: Path,
    local_competitions: Mapping[str, Path],
    *,
    force: bool = True,
    grader: Grader | None = None,
) -> RegradeResult:
    """(Re)grade every trial under `<output_dir>/runs/*/*/spec.json`."""
    # Absolute, as the launcher's trial dirs are: a report's submission_path must not depend on the cwd
    # of `run_paper.py grade runs/x` (a regrade of the same file gives the same report).
    output_dir = output_dir.absolute()
    runs = output_dir / layout.RUNS
    if not runs.is_dir():
        raise UserError(f"{runs}: no such directory (is {output_dir} an --output-dir?)")
    own = None
    if grader is None:  # one grading process for the whole dir, stopped at the end
        grader = own = IsolatedGrader(data_dir, local_competitions)
    try:
        return _grade_all(output_dir, data_dir, grader, force)
    finally:
        if own is not None:
            own.close()


def _grade_all(output_dir: Path, data_dir: Path, active: Grader, force: bool) -> RegradeResult:
    """grade_output_dir's loop over the trials."""
    graded: list[GradingReport] = []
    skipped: list[str] = []
    errors: list[str] = []
    unfinished: list[str] = []
    for spec_path in layout.spec_paths(output_dir):
        trial_dir = spec_path.parent
        spec = load_record(spec_path, TrialSpec)
        if isinstance(spec, Unreadable):
            errors.append(f"{spec_path}: unreadable spec ({type(spec.error).__name__})")
            continue
        if _is_active(trial_dir):
            unfinished.append(spec.trial_id)
            continue
        if not force and layout.report_beside(trial_dir).exists():
            skipped.append(spec.trial_id)
            continue
        try:
            graded.append(grade_trial(trial_dir, spec, data_dir, active))
        except GraderUnavailableError:
            raise  # every MLE-bench trial would say it: one line, not one per trial
        except UserError as exc:
            errors.append(f"{spec.trial_id}: {exc}")
    return RegradeResult(graded, skipped, errors, unfinished)
