"""Helpers for grading tests: trial specs, custom competitions with controlled leaderboards.

Reads nothing; writes competition folders and submissions under the paths it is given.
"""

from __future__ import annotations

import hashlib
import json
import textwrap
from collections.abc import Sequence
from pathlib import Path

from mle_world.records import TrialSpec


def spec_for(task: str, seed: int = 34, regime: str = "gated", configuration: str = "wm-point") -> TrialSpec:
    """A minimal valid TrialSpec."""
    return TrialSpec.model_validate(
        {
            "trial_id": f"{regime}/{configuration}/{task}/seed{seed}",
            "science_hash": "0" * 12,
            "regime": regime,
            "configuration": configuration,
            "task": task,
            "seed": seed,
            "agent": {
                "endpoints": {"coder": {"url": "http://localhost:8000/v1"}},
                "budget": {},
                "search": {},
                "stages": [],
                "world_model": {},
            },
            "paths": {"trial_dir": "/trial", "data_dir": "/data"},
        }
    )


CUSTOM_GRADE = textwrap.dedent(
    '''
    """Test grader: the score is the `value` cell of the first row (or NaN when asked)."""
    import math

    from mle_world.grading.submission import InvalidSubmissionError


    def grade(submission, answers):
        if "value" not in submission.columns:
            raise InvalidSubmissionError("no value column")
        value = submission["value"].iloc[0]
        if isinstance(value, str) and value == "nan-score":
            return math.nan
        return float(value)
    '''
)
CUSTOM_PREPARE = textwrap.dedent(
    '''
    """Test preparer."""
    import json


    def fetch_raw(raw, seed=0):
        (raw / "seed.json").write_text(json.dumps({"seed": seed}))


    def prepare(raw, public, private):
        (public / "train.csv").write_text("id,value\\n1,0\\n")
        (public / "sample_submission.csv").write_text("id,value\\n1,0\\n")
        (private / "test.csv").write_text("id,value\\n1,0\\n")
    '''
)


def write_custom_competition(root: Path, comp_id: str, scores: Sequence[float]) -> Path:
    """A competition whose grader returns the submitted value and whose leaderboard is `scores`."""
    folder = root / comp_id
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text(
        textwrap.dedent(
            f"""\
            id: {comp_id}
            name: {comp_id}
            competition_type: simple
            awards_medals: false
            prizes: null
            description: {comp_id}/description.md
            dataset:
              answers: {comp_id}/prepared/private/test.csv
              sample_submission: {comp_id}/prepared/public/sample_submission.csv
            grader:
              name: value
              grade_fn: whatever.{comp_id}.grade:grade
            preparer: whatever.{comp_id}.prepare:prepare
            """
        )
    )
    (folder / "grade.py").write_text(CUSTOM_GRADE)
    (folder / "prepare.py").write_text(CUSTOM_PREPARE)
    (folder / "description.md").write_text(f"# {comp_id}\n")
    write_leaderboard(folder / "leaderboard.csv", scores)
    return folder


def write_leaderboard(path: Path, scores: Sequence[float]) -> Path:
    """A leaderboard.csv in Kaggle's export format (MLE-bench's), `scores` best to worst."""
    lines = ["scoreNullable,teamId,hasTeamName,submissionDate,score,hasScore"]
    lines += [f"{s},{i},True,2025-01-01 00:00:00,{s},True" for i, s in enumerate(scores)]
    path.write_text("\n".join(lines) + "\n")
    return path


def submit(path: Path, text: str, *, selected: bool = True) -> Path:
    """Write a submission file; `selected` also writes the journal naming it as the best node's, as the
    agent does (`<trial>/journal.json` beside `submission/`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if selected and path.parent.name == "submission":
        digest = hashlib.sha256(text.encode()).hexdigest()
        node = {"id": "n1", "step": 0, "stage": "draft", "submission_sha256": digest}
        journal = {"best_node_id": "n1", "nodes": [node]}
        (path.parent.parent / "journal.json").write_text(json.dumps(journal))
    return path
