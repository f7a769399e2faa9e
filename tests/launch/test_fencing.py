"""Fencing and interruption accounting of the per-trial supervisor, and the watchdog's evidence rule,
without Slurm: a stale start touches nothing, Slurm restarts count as requeues against max_attempts,
squeue/sacct failures never make a job lost, a late success is recorded.

Writes trial directories under pytest's tmp paths; runs tests/launch/fake_agent.py as the agent.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from launchkit import fast_cluster, make_plan, timelines, update_status

from mle_world.errors import UserError
from mle_world.launch.display import SilentDisplay
from mle_world.launch.launcher import SweepLauncher, make_job
from mle_world.launch.slurm.backend import SlurmTrial
from mle_world.launch.slurm.queries import LiveTask, SlurmView
from mle_world.launch.state import Start, read_status
from mle_world.launch.trial import TrialSupervisor
from mle_world.plan.sweep_plan import LaunchOptions


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, p.stat().st_size) for p in root.rglob("*")}


def test_stale_token_exits_at_once_without_touching_the_trial(dirs: tuple[Path, Path]) -> None:
    out, data = dirs
    plan = make_plan(out, data, 1, seconds=0.1)
    run = plan.commands[0]
    trial_dir = run.trial.trial_dir
    update_status(trial_dir, run.trial.trial_id, "submitted", attempt=2, backend="slurm", token="new")
    before = snapshot(trial_dir)
    old = make_job(run, plan, "slurm", token="old")  # the job of a superseded submission
    runner = TrialSupervisor(old, gpu="0", post_trial=None, resume_state="submitted")
    assert runner.run(Start(job_id="7_0", array_id="7")) == "stale"
    assert snapshot(trial_dir) == before and timelines(plan) == [[]]
    # A second start of the current submission while the first runs is stale too.
    current = make_job(run, plan, "slurm", token="new")
    update_status(trial_dir, run.trial.trial_id, "running", slurm_job_id="8_0")
    again = TrialSupervisor(current, gpu="0", post_trial=None, resume_state="submitted")
    assert again.run(Start(job_id="8_0", array_id="8")) == "stale"
    assert timelines(plan) == [[]]
    # The right token runs, and only once.
    update_status(trial_dir, run.trial.trial_id, "submitted", slurm_job_id=None)
    assert TrialSupervisor(current, gpu="0", post_trial=None, resume_state="submitted").run() == "succeeded"
    assert [e["event"] for e in timelines(plan)[0]] == ["start", "end"]


def test_a_run_a_later_attempt_superseded_neither_grades_nor_records_its_end(dirs: tuple[Path, Path]) -> None:
    """The watchdog declared job 7 lost and --retry-failed submitted attempt 2 (a new token) while job 7
    still ran. Job 7 then graded (stamping its submission with attempt 2, read from status.json: the
    audit counted it as attempt 2's result if that one left no report) before its end was refused."""
    out, data = dirs
    plan = make_plan(out, data, 1, seconds=1.0)
    run = plan.commands[0]
    trial_dir, trial_id = run.trial.trial_dir, run.trial.trial_id
    update_status(trial_dir, trial_id, "submitted", attempt=1, backend="slurm", token="first")
    graded: list[str] = []
    job = make_job(run, plan, "slurm", token="first")
    runner = TrialSupervisor(
        job, gpu=None, post_trial=lambda t, state: graded.append(state), resume_state="submitted"
    )
    box: list[str] = []
    thread = threading.Thread(target=lambda: box.append(runner.run(Start(job_id="7_0", array_id="7"))))
    thread.start()
    deadline = time.monotonic() + 30
    while read_status(trial_dir, trial_id).state != "running" and time.monotonic() < deadline:
        time.sleep(0.02)
    update_status(trial_dir, trial_id, "submitted", attempt=2, token="second", slurm_job_id=None)
    thread.join(60)
    assert box == ["stale"] and graded == []
    status = read_status(trial_dir, trial_id)
    assert (status.state, status.attempt, status.token) == ("submitted", 2, "second")


def test_slurm_restarts_count_as_requeues_against_max_attempts(dirs: tuple[Path, Path]) -> None:
    out, data = dirs
    plan = make_plan(out, data, 1, seconds=0.1, cluster=fast_cluster(max_attempts=2))
    run = plan.commands[0]
    trial_dir, trial_id = run.trial.trial_dir, run.trial.trial_id
    job = make_job(run, plan, "slurm", token="s1")
    update_status(trial_dir, trial_id, "submitted", attempt=1, backend="slurm", token="s1")
    first = TrialSupervisor(job, gpu=None, post_trial=None, resume_state="submitted").claim(
        Start("5", None, 0)
    )
    assert not isinstance(first, str) and first.requeues == 0
    # Slurm requeued the job (its process died without a word): the restart is counted.
    second = TrialSupervisor(job, gpu=None, post_trial=None, resume_state="submitted").claim(
        Start("5", None, 1)
    )
    assert not isinstance(second, str) and (second.state, second.requeues) == ("running", 1)
    # The same restart starting twice is a duplicate, not a requeue.
    assert TrialSupervisor(job, gpu=None, post_trial=None, resume_state="submitted").claim(
        Start("5", None, 1)
    ) == ("stale")
    # A second requeue would be the third run: max_attempts 2 ends the trial, infra's fault.
    runner = TrialSupervisor(job, gpu=None, post_trial=None, resume_state="submitted")
    assert runner.run(Start("5", None, 2)) == "failed"
    status = read_status(trial_dir, trial_id)
    assert (status.state, status.failure_class, status.requeues) == ("failed", "infra", 2)
    assert "exceed max_attempts 2" in (status.cause or "") and timelines(plan) == [[]]


def test_checkpoint_requests_a_requeue_only_within_max_attempts(dirs: tuple[Path, Path]) -> None:
    out, data = dirs
    plan = make_plan(out, data, 1, seconds=0.1, cluster=fast_cluster(max_attempts=2))
    run = plan.commands[0]
    trial_dir, trial_id = run.trial.trial_dir, run.trial.trial_id
    trial = SlurmTrial(make_job(run, plan, "slurm", token="s1"), None)
    update_status(trial_dir, trial_id, "submitted", attempt=1, backend="slurm", token="s1")
    assert trial.checkpoint() is not None  # run 2 of 2 allowed
    assert read_status(trial_dir, trial_id).requeues == 0  # counted when the requeued job starts
    update_status(trial_dir, trial_id, requeues=1)
    assert trial.checkpoint() is None
    status = read_status(trial_dir, trial_id)
    assert (status.state, status.failure_class) == ("failed", "infra")


class Said(SilentDisplay):
    """A display that keeps the launcher's lines of news."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def say(self, text: str) -> None:
        self.lines.append(text)


@dataclasses.dataclass
class ScriptedSlurm:
    """A Submitter whose squeue/sacct answers are scripted (Slurm's tools failing on demand)."""

    views: list[SlurmView]
    live_tasks: list[LiveTask] = dataclasses.field(default_factory=list)
    cancelled: list[str] = dataclasses.field(default_factory=list)

    def submit(self, calls: Sequence[Any], params: dict[str, Any]) -> list[str]:
        raise AssertionError("nothing should be submitted")

    def states(self, job_ids: Sequence[str]) -> SlurmView:
        return self.views.pop(0) if len(self.views) > 1 else self.views[0]

    def live(self, job_names: Sequence[str]) -> list[LiveTask] | None:
        return self.live_tasks

    def cancel(self, job_ids: Sequence[str]) -> None:
        self.cancelled.extend(job_ids)

    def max_array_size(self) -> int:
        return 1001

    def check_time_limit(self, partition: str | None, minutes: int) -> None:
        pass

    def release(self, array_ids: Sequence[str]) -> bool:
        return True

    def limits(self, slurm: Any) -> None:
        return None

    def throttle(self, array_id: str, limit: int, *, clear_dependency: bool) -> bool:
        return True  # the sweep's one job keeps its slot


def test_watchdog_waits_while_slurm_tools_fail_and_needs_evidence(dirs: tuple[Path, Path]) -> None:
    out, data = dirs
    plan = make_plan(out, data, 1, seconds=0.1)
    run = plan.commands[0]
    trial_dir, trial_id = run.trial.trial_dir, run.trial.trial_id
    update_status(trial_dir, trial_id, "submitted", attempt=1, backend="slurm", token="s", slurm_job_id="9_0")
    blind = SlurmView({}, squeue_ok=False, sacct_ok=False)
    half = SlurmView({}, squeue_ok=True, sacct_ok=False)
    gone = SlurmView({}, squeue_ok=True, sacct_ok=True)
    slurm = ScriptedSlurm([*[blind] * 30, *[half] * 30, gone])
    said = Said()
    runner = SweepLauncher(
        plan,
        LaunchOptions(backend="slurm", show_progress=False),
        None,
        said,
        submitter_factory=lambda _folder: slurm,
        poll_s=0.001,
        lost_after_s=0.0,
    )
    runner._watch(slurm, [])
    text = "\n".join(said.lines)
    assert text.count("squeue and sacct both fail; waiting") == 1 and "answer again" in text
    status = read_status(trial_dir, trial_id)
    assert status.cause == "slurm job 9_0 unknown to squeue and sacct"
    assert len(slurm.views) == 1  # declared only after both tools answered, never before
    # The job finishes after all: its success is recorded, not refused.
    done = update_status(trial_dir, trial_id, "succeeded", failure_class=None, cause=None)
    assert done is not None and done.state == "succeeded"


def test_reconcile_adopts_live_tasks_and_cancels_orphans(dirs: tuple[Path, Path]) -> None:
    out, data = dirs
    plan = make_plan(out, data, 2, seconds=0.1)
    a, b = (r.trial for r in plan.commands)
    from mle_world.launch.slurm.intents import SubmissionIntent
    from mle_world.launch.state import utcnow
    from mle_world.storage import write_model

    intents = out / "slurm" / "intents"
    intents.mkdir(parents=True)
    for sid in ("old", "cur"):
        write_model(
            intents / f"{sid}.json",
            SubmissionIntent(
                submission=sid,
                job_name=f"mlew-ungated-{sid}",
                trial_ids=(a.trial_id, b.trial_id),
                created_at=utcnow(),
            ),
        )
    for t in (a, b):
        update_status(t.trial_dir, t.trial_id, "submitted", attempt=1, backend="slurm", token="cur")
    tasks = [
        LiveTask(f"{j}_{i}", f"mlew-ungated-{s}", "PENDING")
        for s, j in (("old", 40), ("cur", 41))
        for i in (0, 1)
    ]
    slurm = ScriptedSlurm([SlurmView({}, squeue_ok=True, sacct_ok=True)], live_tasks=tasks)
    said = Said()
    runner = SweepLauncher(plan, LaunchOptions(backend="slurm", show_progress=False), None, said)
    runner._reconcile(slurm)
    assert slurm.cancelled == ["40_0", "40_1"]
    assert [read_status(t.trial_dir, t.trial_id).slurm_job_id for t in (a, b)] == ["41_0", "41_1"]
    assert said.lines == [
        "[launch] slurm: reconciled with squeue: adopted live tasks 2 of array 41; "
        "cancelled 2 orphan task(s) (40_0, 40_1)"
    ]


@dataclasses.dataclass
class Sbatch(ScriptedSlurm):
    """A Submitter whose sbatch answers with array task ids, or refuses (`refuse`)."""

    refuse: str | None = None

    def submit(self, calls: Sequence[Any], params: dict[str, Any]) -> list[str]:
        if self.refuse:
            raise RuntimeError(self.refuse)
        return [f"60_{i}" for i in range(len(calls))]


def test_submission_marks_trials_and_a_refused_sbatch_reverts_them(dirs: tuple[Path, Path]) -> None:
    out, data = dirs
    plan = make_plan(out, data, 2, seconds=0.1)
    opts = LaunchOptions(backend="slurm", show_progress=False, wait=False)
    idle = SlurmView({}, squeue_ok=True, sacct_ok=True)
    refused = Sbatch([idle], refuse="sbatch: error: invalid partition specified: gpu")
    runner = SweepLauncher(plan, opts, None, Said(), submitter_factory=lambda _f: refused)
    with pytest.raises(
        UserError, match="^--backend slurm: submission failed: sbatch: invalid partition specified: gpu$"
    ):
        runner.run()
    for run in plan.commands:
        status = read_status(run.trial.trial_dir, run.trial.trial_id)
        assert (status.state, status.attempt, status.failure_class) == ("pending", 0, "infra")
        assert status.slurm_job_id is None and (status.cause or "").startswith("submission failed: ")
    # sbatch answers: each trial carries the submission's token and its array task's id.
    runner = SweepLauncher(plan, opts, None, Said(), submitter_factory=lambda _f: Sbatch([idle]))
    assert runner.run() == 0
    [intent] = [p.read_text() for p in (out / "slurm" / "intents").glob("*.json") if '"60"' in p.read_text()]
    for i, run in enumerate(plan.commands):
        status = read_status(run.trial.trial_dir, run.trial.trial_id)
        assert (status.state, status.attempt, status.slurm_job_id, status.slurm_array_id) == (
            "submitted", 1, f"60_{i}", "60",
        )  # fmt: skip
        assert status.token and f'"submission":"{status.token}"' in intent.replace(" ", "")
        assert (status.failure_class, status.cause) == (None, None)  # the refused submission's cause reset


def test_watchdog_asks_slurm_at_most_every_query_interval(dirs: tuple[Path, Path]) -> None:
    """Status files every poll, squeue/sacct at most every `slurm.query_interval_s`: asked every 2 s,
    a 12-hour sweep made ~43,000 calls of each to slurmctld and slurmdbd."""
    out, data = dirs
    plan = make_plan(out, data, 1, seconds=0.1)
    run = plan.commands[0]
    trial_dir, trial_id = run.trial.trial_dir, run.trial.trial_id
    update_status(trial_dir, trial_id, "submitted", attempt=1, backend="slurm", token="s", slurm_job_id="9_0")
    asked: list[float] = []

    @dataclasses.dataclass
    class Counting(ScriptedSlurm):
        def states(self, job_ids: Sequence[str]) -> SlurmView:
            asked.append(time.monotonic())
            if len(asked) == 1:  # the trial ends by itself a little later (its job's last write)
                threading.Timer(0.5, lambda: update_status(trial_dir, trial_id, "running")).start()
                threading.Timer(0.6, lambda: update_status(trial_dir, trial_id, "succeeded")).start()
            return SlurmView({"9_0": "RUNNING"}, squeue_ok=True, sacct_ok=True)

    slurm = Counting([])
    cluster = plan.cluster.model_copy(
        update={"slurm": plan.cluster.slurm.model_copy(update={"query_interval_s": 3600.0})}
    )
    runner = SweepLauncher(
        dataclasses.replace(plan, cluster=cluster),
        LaunchOptions(backend="slurm", show_progress=False),
        None,
        Said(),
        submitter_factory=lambda _folder: slurm,
        poll_s=0.01,
    )
    runner._watch(slurm, [])
    assert len(asked) == 1
    assert read_status(trial_dir, trial_id).state == "succeeded"
