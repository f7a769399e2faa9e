"""Which launch ran each trial: status.json records the ids of the launches that submitted it (launch.json
`launch_id`), so trials resumed or retried under a later launch — possibly other code, after
--allow-provenance-change — can be told apart; older status and launch files still read.

Runs the local pool with tests/support/fake_agent.py; writes under pytest's tmp paths.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from pathlib import Path

from launchkit import make_plan

from mle_world.audit.launches import describe, trial_launch_fact, trials_per_launch
from mle_world.launch import run_sweep
from mle_world.launch.display import SilentDisplay
from mle_world.launch.state import read_status
from mle_world.plan.sweep_plan import LaunchOptions, SweepPlan
from mle_world.records import LaunchProvenance, LaunchRecord, TrialStatus

LOCAL = LaunchOptions(show_progress=False)


def launched_as(plan: SweepPlan, launch_id: str) -> SweepPlan:
    return dataclasses.replace(plan, record=plan.record.model_copy(update={"launch_id": launch_id}))


def test_a_retried_trial_records_both_launches_and_a_skipped_one_only_its_own(
    dirs: tuple[Path, Path],
) -> None:
    out, data = dirs
    plan = make_plan(out, data, 2, mode=lambda i: "ok" if i == 0 else "infra-fail", seconds=0.1)
    assert run_sweep(launched_as(plan, "aaaa1111"), LOCAL, display=SilentDisplay()) == 1
    # The second launch (other code, say) reruns the failed trial from its journal and skips the other.
    retry = make_plan(out, data, 2, seconds=0.1)
    assert (
        run_sweep(
            launched_as(retry, "bbbb2222"),
            dataclasses.replace(LOCAL, retry_failed="infra"),
            display=SilentDisplay(),
        )
        == 0
    )
    launches = [read_status(c.trial.trial_dir, c.trial.trial_id).launches for c in plan.commands]
    assert launches == [("aaaa1111",), ("aaaa1111", "bbbb2222")]
    history = [provenance("aaaa1111", 1), provenance("bbbb2222", 2)]
    assert trials_per_launch(out, history, [*launches, ()]) == (
        f"{out}: aaaa1111 (launch 1 of 2, 2026-12-01 01:00 UTC, code 0123456789ab): 1 trial(s); "
        "bbbb2222 (launch 2 of 2, 2026-12-01 02:00 UTC, code 0123456789ab with uncommitted changes): 1 "
        "trial(s), 1 resumed from an earlier launch; 1 trial(s) without a recorded launch (not started, or "
        "from before launches had ids)"
    )


def provenance(launch_id: str | None, hour: int) -> LaunchProvenance:
    return LaunchProvenance(
        created_at=datetime(2026, 12, 1, hour, tzinfo=UTC),
        harness_version="1",
        git_sha="0123456789abcdef",
        git_dirty=hour == 2,
        launch_id=launch_id,
    )


def test_the_trial_page_names_the_launch_from_launch_json(tmp_path: Path) -> None:
    out = tmp_path / "out"
    trial_dir = out / "runs" / "aide" / "iris_seed34"
    trial_dir.mkdir(parents=True)
    record = LaunchRecord(
        argv=("run_paper.py",), launch_id="bbbb2222", harness_version="1", git_sha="0123456789abcdef",
        git_dirty=True, created_at=datetime(2026, 12, 1, 2, tzinfo=UTC), regime="ungated", config_path="c",
        config_hash="h", cluster_path=None, backend="slurm", runtime="process", dry_run=False, sandbox=True,
        data_dir="d", endpoints=(), trials=(), earlier_launches=(provenance(None, 1),),
    )  # fmt: skip
    (out / "launch.json").write_text(record.model_dump_json())
    assert trial_launch_fact(trial_dir, ("cccc3333", "bbbb2222")) == (
        "bbbb2222 (launch 2 of 2, 2026-12-01 02:00 UTC, code 0123456789ab with uncommitted changes); "
        "resumed from cccc3333"
    )
    assert trial_launch_fact(trial_dir, ()) is None
    assert describe("dddd4444", [provenance(None, 1)]) == "dddd4444 (not in launch.json)"


def test_files_from_before_launch_ids_still_read() -> None:
    old_status = {"trial_id": "ungated/aide/t/seed34", "state": "succeeded", "attempt": 1}
    assert TrialStatus.model_validate_json(json.dumps(old_status)).launches == ()
    old = json.loads(provenance(None, 1).model_dump_json())
    del old["launch_id"]
    assert LaunchProvenance.model_validate(old).launch_id is None
