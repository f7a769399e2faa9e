"""The best solution on disk while the metric direction comes from the reviews: kept CSVs, a flip.

Reads nothing; stages submissions in a trial dir under tmp_path as runs would and reviews them by hand.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from mle_world.agent.best import BestSolution
from mle_world.agent.journal import Checkpoint, Journal, Node
from mle_world.agent.workspace import TrialLayout, reset_run_submission, set_up_trial_dir, stage_submission


def _reviewed(layout: TrialLayout, name: str, metric: float, lower_is_better: bool) -> Node:
    """A good node whose run wrote a CSV naming it, staged by the agent as after a real run."""
    reset_run_submission(layout)
    layout.run_submission_csv.write_text(f"id,y\n1,{name}\n")
    sha = stage_submission(layout)
    assert sha is not None
    return Node(
        id=name * 8,
        step=-1,
        stage="draft",
        code=f"print({name!r})",
        executed=True,
        metric=metric,
        lower_is_better=lower_is_better,
        has_submission=True,
        submission_sha256=sha,
    )


@pytest.mark.parametrize("damaged", [False, True])
def test_a_flip_grades_the_kept_csv_only_when_it_is_whole(tmp_path: Path, damaged: bool) -> None:
    data = tmp_path / "data"
    data.mkdir()
    layout = TrialLayout(tmp_path / "trial", data)
    set_up_trial_dir(layout)
    ckpt = Checkpoint(trial_id="t", science_hash="h")
    journal = Journal()
    best = BestSolution(layout, journal, ckpt)

    def consider(node: Node) -> None:
        best.consider(node)
        journal.append(node)

    consider(_reviewed(layout, "a", 0.5, True))  # the first vote: lower is better; a is the best
    consider(_reviewed(layout, "b", 0.7, False))  # a tie keeps the direction: b is only kept
    assert ckpt.best_node_id == "a" * 8
    if damaged:  # what a machine crash can leave of a kept copy that was never fsynced
        (layout.node_logs / f"{'b' * 8}.submission.csv").write_text("")
    consider(_reviewed(layout, "c", 0.6, False))  # the majority flips: higher is better

    assert journal.lower_is_better is False
    winner = "c" if damaged else "b"  # a damaged b is not graded; c then beats a
    assert ckpt.best_node_id == winner * 8
    graded = layout.submission_csv.read_bytes()
    assert graded == f"id,y\n1,{winner}\n".encode()
    assert hashlib.sha256(graded).hexdigest() == journal.get(ckpt.best_node_id).submission_sha256  # type: ignore[union-attr]
    assert layout.best_solution.read_text() == f"print({winner!r})"


def test_a_promotion_cut_before_the_checkpoint_is_undone_on_resume(tmp_path: Path) -> None:
    # What a kill (or SIGTERM's Preempted, raised anywhere) between promoting b and the checkpoint
    # leaves: the graded file and code are b's, the checkpoint's best is a. Resuming, the replayed
    # step may not promote b again: the graded file must be a's, whose hash the checkpoint records.
    data = tmp_path / "data"
    data.mkdir()
    layout = TrialLayout(tmp_path / "trial", data)
    set_up_trial_dir(layout)
    ckpt = Checkpoint(trial_id="t", science_hash="h", lower_is_better=True, direction_source="task")
    journal = Journal(lower_is_better=True)
    best = BestSolution(layout, journal, ckpt)
    a = _reviewed(layout, "a", 0.5, True)
    best.consider(a)
    journal.append(a)
    ckpt.nodes = journal.nodes
    saved = ckpt.model_copy(deep=True)  # the last checkpoint: a is the best
    best.consider(_reviewed(layout, "b", 0.4, True))  # promoted, then the agent is killed
    assert layout.submission_csv.read_text() == "id,y\n1,b\n"

    resumed = BestSolution(layout, Journal(list(saved.nodes), True), saved)
    resumed.restore()
    graded = layout.submission_csv.read_bytes()
    assert hashlib.sha256(graded).hexdigest() == a.submission_sha256
    assert layout.best_solution.read_text() == "print('a')"
    resumed.restore()  # nothing to do the second time
    assert layout.submission_csv.read_bytes() == graded
