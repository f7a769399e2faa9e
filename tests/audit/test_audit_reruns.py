"""Which attempt's grading report the audit counts while a trial is rerun (`--retry-failed`).

Runs the real local launcher (fake agent commands), the real grader over a custom local competition and
the real status transitions; audits the output dir at each stage. Writes only under pytest's tmp paths.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from auditkit import tid, write_launch
from gradekit import submit, write_custom_competition
from launchkit import make_plan

from mle_world import layout
from mle_world.audit import audit, run_audit
from mle_world.audit.trialview import load_trial_view
from mle_world.costs.account import write_trial_costs
from mle_world.costs.prices import load_prices
from mle_world.grading.builtin import BuiltinGrader
from mle_world.grading.grader import grade_trial
from mle_world.launch.display import SilentDisplay
from mle_world.launch.launcher import run_sweep
from mle_world.launch.state import Start, claim, mark_submitted, read_status
from mle_world.plan.sweep import PlannedTrial
from mle_world.plan.sweep_plan import LaunchOptions
from mle_world.tasks.local import prepare_local

pytestmark = pytest.mark.timeout(120)
OPTIONS = {"backend": "local", "n_workers": 1, "gpu_devices": ("none",), "show_progress": False}


def test_a_rerun_supersedes_the_report_of_the_attempt_before_it(tmp_path: Path) -> None:
    out, data = tmp_path / "out", tmp_path / "data"
    comps = {"task00": write_custom_competition(tmp_path / "comps", "task00", [0.1 * i for i in range(20)])}
    prepare_local("task00", comps["task00"], data)
    grader = BuiltinGrader(comps, data)
    failing_hook = False

    def post_trial(trial: PlannedTrial, state: str) -> None:  # what TrialFinisher does: costs, then grading
        write_trial_costs(trial.trial_dir, trial.spec, out, load_prices())
        if failing_hook:
            raise OSError(28, "No space left on device")
        grade_trial(trial.trial_dir, trial.spec, data, grader, trial_state=state)  # type: ignore[arg-type]

    crash = make_plan(out, data, 1, mode="crash", seconds=0.1, prepare=False)
    trial = crash.commands[0].trial
    trial_id = trial.trial_id
    write_launch(out, "ungated", [trial_id])
    assert trial_id == tid("ungated", "aide", "task00", 34)
    # The agent left a submission, then its run crashed: failed/infra, graded as it stands.
    submit(trial.trial_dir / layout.SUBMISSION_RELPATH, "id,value\n1,1.5\n")
    (trial.trial_dir / "events.jsonl").write_text("")
    assert run_sweep(crash, LaunchOptions(**OPTIONS), post_trial=post_trial, display=SilentDisplay()) == 1
    report = layout.report_beside(trial.trial_dir)
    assert json.loads(report.read_text())["attempt"] == 1
    first = audit([out])
    assert [t.report.score for t in first.sweep.found if t.report] == [1.5]
    assert first.rates[0].seeds_used == [34] and first.costs[0].with_costs == 1

    # --retry-failed takes it again (the launcher's mark, the trial job's claim): attempt 2 is running.
    mark_submitted(trial.trial_dir, trial_id, token="t2", backend="local")
    claimed = claim(trial.trial_dir, trial_id, "t2", Start(), 3, host="h", gpu=None)
    assert not isinstance(claimed, str) and claimed.attempt == 2
    running = audit([out])
    (rerun,) = running.sweep.trials
    assert rerun.report is None and running.sweep.found == [] and running.sweep.missing == [rerun]
    assert rerun.superseded == "rerun: attempt 2 running; the report of attempt 1 is not counted"
    # Its seed is not complete and its earlier attempt's costs are no trial's cost yet.
    assert running.rates[0].seeds_used == [] and running.costs[0].with_costs == 0
    assert run_audit([out], out_dir=tmp_path / "audit", plots=False, trial_pages=False) == 0
    md = (tmp_path / "audit" / "report.md").read_text()
    assert f"missing: {trial_id} (rerun: attempt 2 running; the report of attempt 1 is not counted)" in md
    assert "| expected | found | missing | superseded |" in md and "\n| 1 | 0 | 1 | 1 |" in md
    assert "Superseded: trials rerun after their report was written" in md
    summary = (tmp_path / "audit" / "summary.csv").read_text()
    assert "completeness,,,superseded,1,," in summary and "completeness,,,found,0,," in summary
    # The trial's page (`run_paper.py show`, the audit's trial pages) shows no earlier attempt's score either.
    view = load_trial_view(trial.trial_dir)
    assert "grading report: rerun: attempt 2 running; the report of attempt 1 is not counted" in view.problems
    assert not [label for label, _ in view.facts if label in ("score", "valid submission", "medal")]
    # A report written before attempts were recorded is superseded the same way while a rerun runs.
    old = json.loads(report.read_text())
    del old["attempt"]
    report.write_text(json.dumps(old))
    assert "the report of an earlier attempt is not counted" in (
        audit([out]).sweep.trials[0].superseded or ""
    )

    # The rerun ends, but its grading fails: the report on disk is still attempt 1's, not this result.
    ok = make_plan(out, data, 1, mode="ok", seconds=0.1, prepare=False)
    failing_hook = True
    assert run_sweep(ok, LaunchOptions(**OPTIONS), post_trial=post_trial, display=SilentDisplay()) == 1
    status = read_status(trial.trial_dir, trial_id)
    assert (status.state, status.attempt, status.failure_class) == ("failed", 2, "infra")
    report.write_text(json.dumps({**old, "attempt": 1}))
    ended = audit([out])
    (stale,) = ended.sweep.trials
    assert stale.report is None and ended.sweep.missing == [stale]
    assert (stale.superseded or "").startswith(
        "rerun: attempt 2 failed without a report of its own (post-trial"
    )
    assert (stale.superseded or "").endswith("the report of attempt 1 is not counted")

    # --retry-failed once more: attempt 3 succeeds and is graded; exactly its report counts.
    failing_hook = False
    retry = LaunchOptions(**OPTIONS, retry_failed="infra")
    assert run_sweep(ok, retry, post_trial=post_trial, display=SilentDisplay()) == 0
    final = audit([out])
    (done,) = final.sweep.found
    assert done.report is not None and (done.report.attempt, done.report.trial_state) == (3, "succeeded")
    assert done.superseded is None and final.sweep.superseded == [] and final.rates[0].seeds_used == [34]
    assert ("score", "1.5") in load_trial_view(trial.trial_dir).facts
