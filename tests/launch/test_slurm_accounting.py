"""The accounting's limits (sacctmgr) before a submission: a job time above the QOS's or the association's
MaxWall is refused before sbatch, a sweep above a MaxSubmitJobs limit is submitted in waves within it,
and without accounting nothing changes.

Creates a QOS and an account per test in the local Slurm's real slurmdbd with the real sacctmgr (the
local cluster does not enforce limits — AccountingStorageEnforce=none — so the launcher alone keeps to
them, which is what is tested); deletes them after. Submits short jobs; writes under pytest's tmp paths.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from launchkit import fast_cluster, make_plan
from rich.console import Console

from mle_world.cli.status_view import SweepStatus, status_view
from mle_world.errors import UserError
from mle_world.launch import run_sweep
from mle_world.launch.display import SilentDisplay
from mle_world.launch.slurm.intents import load_intents
from mle_world.launch.slurm.limits import read_limits
from mle_world.launch.state import read_status, utcnow
from mle_world.plan.cluster import ClusterConfig
from mle_world.plan.sweep_plan import LaunchOptions
from mle_world.records import TrialStatus


class Said(SilentDisplay):
    def __init__(self) -> None:
        self.lines: list[str] = []

    def say(self, text: str) -> None:
        self.lines.append(text)


def cluster(**slurm: Any) -> ClusterConfig:
    data = fast_cluster(parallelism=4).model_dump()
    data["slurm"].update(slurm)
    return ClusterConfig.model_validate(data)


def sacctmgr(*args: str) -> None:
    subprocess.run(["sacctmgr", "-i", *args], check=True, capture_output=True, text=True)


@pytest.fixture
def qos(slurm_cluster: None) -> Iterator[str]:
    name = f"mlew-qos-{os.getpid()}"
    sacctmgr("add", "qos", name)
    try:
        yield name
    finally:
        sacctmgr("delete", "qos", name)


@pytest.fixture
def account(slurm_cluster: None) -> Iterator[str]:
    name = f"mlew-acct-{os.getpid()}"
    sacctmgr("add", "account", name)
    sacctmgr("add", "user", "root", f"account={name}")
    try:
        yield name
    finally:
        subprocess.run(["sacctmgr", "-i", "delete", "user", "root", f"account={name}"], capture_output=True)
        sacctmgr("delete", "account", name)


def pending_unsubmitted(out: Path) -> None:
    assert not (out / "slurm" / "intents").exists()


@pytest.mark.slurm
def test_a_job_time_above_the_qos_maxwall_is_refused_before_sbatch(qos: str, dirs: tuple[Path, Path]) -> None:
    """Under AccountingStorageEnforce=limits such an array pends for ever (QOSMaxWallDurationPerJobLimit)
    while the launcher watches; the partition's limit was the only one read."""
    out, data = dirs
    sacctmgr("modify", "qos", qos, "set", "MaxWall=00:10:00")
    plan = make_plan(out, data, 2, budget_s=600.0, cluster=cluster(qos=qos))  # 10 + 3 min
    with pytest.raises(UserError) as err:
        run_sweep(plan, LaunchOptions(backend="slurm", show_progress=False), display=SilentDisplay())
    assert str(err.value) == (
        f"QOS {qos} (slurm.qos): MaxWall 00:10:00 (10 min), but each trial's job needs 13 min (the budget + "
        "slurm.grading_margin_min): Slurm would keep the array pending for ever "
        "(QOSMaxWallDurationPerJobLimit); choose another QOS or account, or a smaller budget or margin"
    )
    pending_unsubmitted(out)
    assert [read_status(c.trial.trial_dir, c.trial.trial_id).state for c in plan.commands] == ["pending"] * 2


@pytest.mark.slurm
def test_the_associations_maxwall_inherited_from_its_account_is_refused(
    account: str, dirs: tuple[Path, Path]
) -> None:
    """Set on the account, shown by sacctmgr on the user's association below it (inherited)."""
    out, data = dirs
    sacctmgr("modify", "account", account, "set", "MaxWall=10")
    plan = make_plan(out, data, 1, budget_s=600.0, cluster=cluster(account=account))
    with pytest.raises(UserError) as err:
        run_sweep(plan, LaunchOptions(backend="slurm", show_progress=False), display=SilentDisplay())
    assert str(err.value).startswith(
        f"the association of user root, account {account} (slurm.account): MaxWall 00:10:00 (10 min), but "
        "each trial's job needs 13 min"
    )
    assert "(AssocMaxWallDurationPerJobLimit)" in str(err.value)
    pending_unsubmitted(out)


@pytest.mark.slurm
def test_a_sweep_above_max_submit_jobs_per_user_goes_in_waves(qos: str, dirs: tuple[Path, Path]) -> None:
    """5 trials, MaxSubmitJobsPerUser=2: sbatch refused the whole array (`Job violates accounting/QOS
    policy`, every array task counts). Now 2 go, then the next ones as they end, never above 2."""
    out, data = dirs
    sacctmgr("modify", "qos", qos, "set", "MaxSubmitJobsPerUser=2")
    plan = make_plan(out, data, 5, seconds=0.5, cluster=cluster(qos=qos))
    said = Said()
    assert run_sweep(plan, LaunchOptions(backend="slurm", show_progress=False), display=said) == 0
    assert said.lines[0] == (
        f"[launch] slurm: MaxSubmitJobsPerUser 2 of QOS {qos} (slurm.qos) with 0 job(s) already counted against "
        "it: submitting 2 of 5 trials now, the rest as these end"
    )
    final = [read_status(c.trial.trial_dir, c.trial.trial_id) for c in plan.commands]
    assert [s.state for s in final] == ["succeeded"] * 5
    sizes = [len(intent.trial_ids) for _, intent in load_intents(out)]
    assert sum(sizes) == 5 and max(sizes) <= 2 and len(sizes) >= 3


@pytest.mark.slurm
def test_the_accounts_max_submit_jobs_counts_the_jobs_already_queued(
    account: str, dirs: tuple[Path, Path]
) -> None:
    """Jobs of the user already queued under the account count against its MaxSubmitJobs: with 2 of
    3 taken, a sweep without --wait submits one trial and says the rest stay pending; re-run while
    all 3 are taken, it submits none."""
    out, data = dirs
    sacctmgr("modify", "account", account, "set", "MaxSubmitJobs=3")
    held = subprocess.run(
        ["sbatch", "--parsable", "--hold", "-A", account, "--array=0-1", "-o", "/dev/null", "--wrap", "true"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    try:
        plan = make_plan(out, data, 3, seconds=120.0, cluster=cluster(account=account))
        said = Said()
        opts = LaunchOptions(backend="slurm", show_progress=False, wait=False)
        assert run_sweep(plan, opts, display=said) == 0
        assert (
            f"[launch] slurm: MaxSubmitJobs 3 of the association of user root, account {account} "
            "(slurm.account) with 2 job(s) already counted against it: submitting 1 of 3 trials now, the "
            "rest as these end"
        ) in said.lines
        assert said.lines[-1].startswith(
            "[launch] submitted; 2 trial(s) held back by the limit stay pending: re-run later"
        )
        states = [read_status(c.trial.trial_dir, c.trial.trial_id).state for c in plan.commands]
        assert states.count("pending") == 2
        again = Said()
        assert run_sweep(plan, opts, display=again) == 0
        assert again.lines[1].endswith(  # after the reconciliation's line (it adopted the running one)
            "with 3 job(s) already counted against it: none of 2 trials can be submitted until some of "
            "those end"
        )
        # The same two stay pending; the submitted one may have started meanwhile.
        after = [read_status(c.trial.trial_dir, c.trial.trial_id).state for c in plan.commands]
        assert [s == "pending" for s in after] == [s == "pending" for s in states], (states, after)
        assert {s for s in after if s != "pending"} <= {"submitted", "running"}, after
    finally:
        subprocess.run(["scancel", held], check=False)
        subprocess.run(["scancel", "-A", account], check=False)


def test_without_sacctmgr_no_limit_is_known(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No accounting (sacctmgr absent, or no slurmdbd answering): nothing is read, nothing refused."""
    monkeypatch.setenv("PATH", str(tmp_path))
    assert read_limits(account=None, qos=None, partition=None) is None


def test_status_says_what_a_limits_pending_reason_means(tmp_path: Path) -> None:
    """`pending in Slurm: 3 task(s): QOSMaxWallDurationPerJobLimit 3` left a user waiting for tasks
    that never start; a limit's reason now says what it means and what to change."""
    waiting = TrialStatus(trial_id="ungated/aide/a/seed34", state="submitted", backend="slurm")
    sweep = SweepStatus(
        (waiting,),
        (),
        pending=(("QOSMaxWallDurationPerJobLimit", 3), ("AssocMaxJobsLimit", 2), ("Priority", 1)),
    )
    console = Console(width=300, record=True)
    for renderable in status_view(tmp_path, sweep, utcnow()).renderables:
        console.print(renderable)
    lines = console.export_text().splitlines()
    at = lines.index(
        "pending in Slurm: 6 task(s): QOSMaxWallDurationPerJobLimit 3, AssocMaxJobsLimit 2, Priority 1"
    )
    assert lines[at + 1 : at + 3] == [
        "  QOSMaxWallDurationPerJobLimit: never start as submitted: run_paper.py cancel, then choose a QOS "
        "(slurm.qos) whose MaxWall fits the budget + slurm.grading_margin_min",
        "  AssocMaxJobsLimit: start as jobs of yours end (the association's MaxJobs)",
    ]
