"""What runs on the host after a trial's agent exits: the cost CSV and grading (with --grade); and once
status.json says how it ended, the audit's digest.

Reads the trial's spec.json, submission/ and events.jsonl; writes its grading report, costs/*.csv and
(through the `digest` it is given) its audit digest beside the trial dir.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from mle_world.costs.account import write_trial_costs
from mle_world.costs.prices import load_prices
from mle_world.grading.grader import grade_trial
from mle_world.grading.isolation import IsolatedGrader
from mle_world.launch.trial import to_grade
from mle_world.layout import cost_path
from mle_world.plan.sweep import PlannedTrial


@dataclass(frozen=True)
class TrialFinisher:
    """Picklable post-trial step (submitit ships it to Slurm jobs): account costs (every ended trial:
    a failed one without a submission spent too), then grade (what `to_grade` says).

    In that order so that a grading report, which records the trial's final state, is the last thing
    written: a failure accounting costs (a full disk, a bad price table) fails the trial as infra, and
    grading after it would have left a report saying "succeeded" beside a status saying "failed".

    `recorded(trial)`, once status.json is final (the supervisor calls it after recording the end, the
    launcher after grading an ended trial), keeps what the audit reads of the trial in its digest through
    `digest(trial dir, cost CSV)` (`audit.digest.write_trial_digest`, given by the CLI: the audit is a layer
    above this one). It only saves the audit reads: a failure writing it leaves the trial as it was."""

    output_dir: Path
    data_dir: Path
    prices_path: Path
    grade: bool
    local_competitions: dict[str, Path] = field(default_factory=dict)
    digest: Callable[[Path, Path], object] | None = None

    def __call__(self, trial: PlannedTrial, state: Literal["succeeded", "failed"] = "succeeded") -> None:
        write_trial_costs(trial.trial_dir, trial.spec, self.output_dir, load_prices(self.prices_path))
        if self.grade and to_grade(state, trial.trial_dir):
            with IsolatedGrader(self.data_dir, self.local_competitions) as grader:
                grade_trial(trial.trial_dir, trial.spec, self.data_dir, grader, trial_state=state)

    def recorded(self, trial: PlannedTrial) -> None:
        """Write the trial's audit digest (never raises for a full disk or a vanished file)."""
        if self.digest is None:
            return
        spec = trial.spec
        try:
            self.digest(trial.trial_dir, cost_path(self.output_dir, spec.configuration, spec.task, spec.seed))
        except OSError:
            pass  # no digest: the audit reads the trial's files themselves
