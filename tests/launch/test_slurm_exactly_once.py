"""Exactly once on the real local Slurm: a launcher SIGKILLed at each step of a submission and re-run
runs every trial once with no orphan array; `scontrol requeue` is counted and bounded by max_attempts.

Writes trial dirs and submitit folders under pytest's tmp paths; submits jobs to the local Slurm.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from launchkit import fast_cluster, make_plan, release_requeued, timelines, wait_until
from rich.console import Console

from mle_world.cli.status_view import show_status
from mle_world.launch import run_sweep
from mle_world.launch.display import SilentDisplay
from mle_world.launch.slurm.intents import KILL_AT_ENV
from mle_world.launch.state import read_status
from mle_world.plan.sweep_plan import LaunchOptions

pytestmark = pytest.mark.slurm
DRIVE = Path(__file__).parents[1] / "support" / "drive.py"
SLURM = LaunchOptions(backend="slurm", show_progress=False)


def starts_of(events: list[dict[str, object]]) -> list[dict[str, object]]:
    return [e for e in events if e["event"] == "start"]


def job_names(out: Path) -> list[str]:
    return [json.loads(p.read_text())["job_name"] for p in (out / "slurm" / "intents").glob("*.json")]


def slurm_tasks(names: list[str]) -> list[tuple[str, str]]:
    """Every task Slurm accounted for under these job names (JobID, State)."""
    proc = subprocess.run(
        ["sacct", "-X", "-P", "-n", "-o", "JobID,State", "-S", "now-3hours", "--name", ",".join(names)],
        capture_output=True,
        text=True,
        check=True,
    )
    return [tuple(line.split("|")[:2]) for line in proc.stdout.splitlines() if line.strip()]  # type: ignore[misc]


@pytest.mark.parametrize("point", ["before-sbatch", "after-sbatch", "recorded-1"])
def test_launcher_killed_during_submission_then_rerun_runs_every_trial_once(
    slurm_cluster: None, dirs: tuple[Path, Path], point: str
) -> None:
    out, data = dirs
    argv = [sys.executable, str(DRIVE), str(out), str(data), "2", "ok", "3", "slurm", "--parallelism", "2"]
    killed = subprocess.run(
        argv, env={**os.environ, KILL_AT_ENV: point}, capture_output=True, text=True, timeout=120
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    if point != "before-sbatch":
        # Submitted held: no task starts before the launcher has recorded every trial's job id and
        # released the array (a task starting meanwhile wrote status.json beside the launcher).
        held = ["squeue", "-h", "-r", "-n", ",".join(job_names(out)), "-o", "%T %r"]
        assert (
            subprocess.run(held, capture_output=True, text=True).stdout.splitlines()
            == ["PENDING JobHeldUser"] * 2
        )
        assert all(not events for events in timelines(make_plan(out, data, 2, seconds=3)))
    rerun = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    if point != "before-sbatch":
        assert (
            "reconciled with squeue: adopted live tasks" in rerun.stderr
            or "nothing to submit" in rerun.stderr
        )

    plan = make_plan(out, data, 2, seconds=3)
    starts = [starts_of(events) for events in timelines(plan)]
    assert [len(s) for s in starts] == [1, 1]  # every trial's agent started exactly once
    final = [read_status(r.trial.trial_dir, r.trial.trial_id) for r in plan.commands]
    assert [(s.state, s.attempt) for s in final] == [("succeeded", 1)] * 2
    names = job_names(out)

    def queued() -> list[str]:
        cmd = ["squeue", "-h", "-n", ",".join(names), "-o", "%i %T"]
        return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.splitlines()

    # No orphan array left: nothing pending. A task whose trial has just succeeded may still be listed
    # as RUNNING or COMPLETING while its batch script exits on a busy node, so wait for the queue to
    # drain; a stray task that ran a trial again would show as a second start below.
    assert [line for line in queued() if "PENDING" in line] == []
    wait_until(lambda: queued() == [], 120, "the queue to drain")
    assert [len(s) for s in (starts_of(events) for events in timelines(plan))] == [1, 1]
    # Every allocation Slurm gave these submissions ran a trial: one task per trial, all completed.
    wait_until(lambda: sorted(s for _, s in slurm_tasks(names)) == ["COMPLETED"] * 2, 60, "accounting")
    assert sorted(j for j, _ in slurm_tasks(names)) == sorted(s.slurm_job_id or "" for s in final)


def test_scontrol_requeue_twice_is_counted_and_bounded_by_max_attempts(
    slurm_cluster: None, dirs: tuple[Path, Path]
) -> None:
    out, data = dirs
    plan = make_plan(
        out, data, 1, mode="checkpoint", seconds=300, cluster=fast_cluster(parallelism=1, max_attempts=2)
    )
    trial = plan.commands[0].trial
    codes: list[int] = []
    launcher = threading.Thread(target=lambda: codes.append(run_sweep(plan, SLURM, display=SilentDisplay())))
    launcher.start()

    def status():  # type: ignore[no-untyped-def]
        return read_status(trial.trial_dir, trial.trial_id)

    def starts() -> int:
        return [e["event"] for e in timelines(plan)[0]].count("start")

    # Each requeue hits a running agent (its handlers in place), not a job still starting it.
    wait_until(lambda: status().state == "running" and starts() == 1, 90, "agent running")
    job = status().slurm_job_id
    assert job
    subprocess.run(["scontrol", "requeue", job], check=True)
    release_requeued(job)
    wait_until(lambda: status().requeues == 1 and starts() == 2, 240, "agent restarted after requeue 1")
    first = status()
    assert (first.attempt, first.preemptions, first.slurm_job_id) == (1, 1, job)
    subprocess.run(["scontrol", "requeue", job], check=True)
    release_requeued(job)
    launcher.join(timeout=300)
    assert codes == [1]
    done = status()
    assert (done.state, done.failure_class, done.requeues) == ("failed", "infra", 2)
    assert "exceed max_attempts 2" in (done.cause or "")
    # The agent ran twice (start, checkpoint, start, checkpoint), never a third time.
    assert [e["event"] for e in timelines(plan)[0]] == ["start", "checkpoint", "start", "checkpoint"]
    console = Console(record=True, width=250, file=open(os.devnull, "w"))  # noqa: SIM115
    show_status(out, console)
    assert "interruptions: 2 requeue(s) by Slurm, 2 preemption(s) checkpointed" in console.export_text()
