"""The best solution on disk while the metric direction comes from the reviews: kept CSVs, a flip.

Reads nothing; stages submissions in a trial dir under tmp_path as runs would and reviews them by hand.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from agent_helpers import coder_reply, make_spec
from fakeserver import FakeOpenAIServer

from mle_world.agent.__main__ import build_agent
from mle_world.agent.best import BestSolution
from mle_world.agent.journal import Checkpoint, Journal, Node
from mle_world.agent.llm.client import Backoff
from mle_world.agent.sandbox.workspace import (
    TrialLayout,
    reset_run_submission,
    set_up_trial_dir,
    stage_submission,
)
from mle_world.records import BudgetSettings


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


PROMOTED_EVERY_STEP = """
import os, sys
# A hostile script: a better metric every run, and a submission as long as it likes (up to the disk
# limit: the workspace's copy is removed by the next run, the agent's kept copies were not).
count = int(open("working/n").read()) if os.path.exists("working/n") else 0
open("working/n", "w").write(str(count + 1))
with open("submission/submission.csv", "wb") as handle:
    handle.write(b"id,target\\n" + b"1,1\\n" * (2 << 20))
print("Validation metric:", 0.1 + count / 100)
"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize("direction", ["task", "reviews"])
def test_kept_csvs_stay_few_when_every_step_promotes_a_new_best(
    tmp_path: Path, competition: tuple[Path, Path], servers: dict[str, FakeOpenAIServer], direction: str
) -> None:
    """Each promoted node's CSV was kept in logs/nodes/ for good: the trial dir grew by one submission
    (up to the disk limit each) per step, outside the workspace's quota."""
    public, _ = competition
    for _ in range(6):
        servers["coder"].push(coder_reply(PROMOTED_EVERY_STEP, "Better."))
    budget = BudgetSettings(
        time_limit_s=120, max_steps=6, exec_timeout_s=20, debug_timeout_s=10, min_step_s=0
    )
    spec = make_spec(tmp_path, public, servers, budget=budget)
    if direction == "task":
        spec = spec.model_copy(update={"lower_is_better": False})
    result = build_agent(spec, backoff=Backoff(base_s=0.01, cap_s=0.05), kill_grace_s=1.0).run()
    assert result.status == "completed" and result.steps == 6
    kept = sorted((tmp_path / "trial" / "logs" / "nodes").glob("*.submission.csv"))
    # The best (the graded file's inode) and, with the direction from the reviews, the worst (the best
    # if the majority flips); before, all six were kept.
    assert len(kept) == (1 if direction == "task" else 2), [p.name for p in kept]
    assert result.best_node_id in {p.name.split(".")[0] for p in kept}
