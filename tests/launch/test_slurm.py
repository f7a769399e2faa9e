"""Slurm backend on the real local cluster (scripts/slurm/local_cluster.sh): arrays, GPUs, scancel,
requeue, idempotence; plus the pure pieces (sbatch preview, sacct parsing, resume rule) without Slurm.

Writes trial dirs and submitit folders under pytest's tmp paths; submits jobs to the local Slurm.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from launchkit import fast_cluster, make_plan, max_overlap, release_requeued, timelines, wait_until

from mle_world.launch import run_sweep, write_sbatch_preview
from mle_world.launch.display import SilentDisplay
from mle_world.launch.launcher import resume_action
from mle_world.launch.slurm.queries import _expand
from mle_world.launch.state import read_status, utcnow
from mle_world.launch.sweep_state import read_sweep_status
from mle_world.launch.sweep_summary import summarise
from mle_world.plan.sweep_plan import LaunchOptions
from mle_world.records import TrialStatus

SLURM = LaunchOptions(backend="slurm", show_progress=False)


@dataclass
class ProgressRecord(SilentDisplay):
    """What a launcher showed of its progress bar."""

    total: int = 0
    updates: list[tuple[int, int, int]] = field(default_factory=list)
    stopped: bool = False

    def start_progress(self, total: int) -> None:
        self.total = total

    def update_progress(self, done: int, running: int, failed: int) -> None:
        self.updates.append((done, running, failed))

    def stop_progress(self) -> None:
        self.stopped = True


def statuses(plan) -> list[TrialStatus]:  # type: ignore[no-untyped-def]
    return [read_status(r.trial.trial_dir, r.trial.trial_id) for r in plan.commands]


def agent_ran_for(trial_dir: Path, seconds: float) -> bool:
    """The fake agent's first start record is at least `seconds` old."""
    try:
        first = json.loads((trial_dir / "timeline.jsonl").read_text().splitlines()[0])
    except (OSError, IndexError, ValueError):
        return False
    return time.time() - float(first["t"]) >= seconds


def test_sbatch_preview_is_submitits_script(dirs: tuple[Path, Path]) -> None:
    out, data = dirs
    plan = make_plan(out, data, 12, budget_s=600.0, cluster=fast_cluster(parallelism=2))
    [path] = write_sbatch_preview(plan, SLURM)
    text = path.read_text()
    assert path.parent == out / "slurm" / "preview"
    for line in (
        "#SBATCH --array=0-11%2",
        "#SBATCH --gpus-per-node=1",
        "#SBATCH --time=13",
        "#SBATCH --partition=gpu",
        "#SBATCH --signal=USR2@90",
        "submitit.core._submit",
    ):
        assert line in text
    assert "# task 11: ungated/aide/task11/seed34" in text
    # as submitit submits it: the folder ("out dir") quoted, else the job reads a folder "…/out"
    assert f"-u -m submitit.core._submit {shlex.quote(str(out / 'slurm'))}\n" in text
    assert not (out / "runs").exists()  # a dry run touches no trial


def test_sacct_array_ranges_expand() -> None:
    assert _expand("12_[3-5,8%2]") == ["12_3", "12_4", "12_5", "12_8"]
    assert _expand("12_7") == ["12_7"] and _expand("13") == ["13"]


def test_resume_rule() -> None:
    base = TrialStatus(trial_id="t", state="running", backend="slurm", slurm_job_id="4_1", attempt=1)
    assert resume_action(base, SLURM, 3, "RUNNING") == "watch"
    assert resume_action(base, SLURM, 3, None) == "watch"
    assert resume_action(base, SLURM, 3, "CANCELLED") == "stale"
    failed = base.model_copy(update={"state": "failed", "failure_class": "agent"})
    assert resume_action(failed, SLURM, 3, None) == "skip"
    assert resume_action(failed, LaunchOptions(backend="slurm", retry_failed="all"), 3, None) == "run"
    assert resume_action(failed, LaunchOptions(backend="slurm", retry_failed="infra"), 3, None) == "skip"
    assert resume_action(base.model_copy(update={"state": "succeeded"}), SLURM, 3, None) == "skip"


@pytest.mark.slurm
def test_array_of_six_with_parallelism_two(slurm_cluster: None, dirs: tuple[Path, Path]) -> None:
    out, data = dirs
    # six trials on four GPUs: without the array's %2 up to four would run at once
    plan = make_plan(out, data, 6, seconds=2.0, cluster=fast_cluster(parallelism=2))
    assert run_sweep(plan, SLURM, display=SilentDisplay()) == 0
    final = statuses(plan)
    assert [s.state for s in final] == ["succeeded"] * 6
    arrays = {s.slurm_array_id for s in final}
    assert len(arrays) == 1 and None not in arrays  # one array for the whole submission
    array = arrays.pop()
    assert sorted(s.slurm_job_id or "" for s in final) == sorted(f"{array}_{i}" for i in range(6))
    spans, by_gpu = [], {}
    for events in timelines(plan):
        [start] = [e for e in events if e["event"] == "start"]
        [end] = [e for e in events if e["event"] == "end"]
        gpu = str(start["gpu"])
        assert gpu in {"0", "1", "2", "3"}  # exactly one GPU through CUDA_VISIBLE_DEVICES
        span = (float(start["t"]), float(end["t"]))  # type: ignore[arg-type]
        spans.append(span)
        by_gpu.setdefault(gpu, []).append(span)
    assert max_overlap(spans) <= 2  # never more than array_parallelism at once
    assert all(max_overlap(s) == 1 for s in by_gpu.values())
    script = next((out / "slurm").glob("*_submission.sh")).read_text()
    assert "#SBATCH --array=0-5%2" in script
    # The dry run's preview is the script submitit submitted (the output dir has a space: quoted),
    # but for the job name's submission id and the preview's comments.
    [preview] = write_sbatch_preview(plan, SLURM)

    def script_lines(text: str) -> list[str]:
        return [
            ln
            for ln in text.splitlines()
            if ln.strip() and not ln.startswith(("#SBATCH --job-name=", "# task", "# array"))
        ]

    assert script_lines(preview.read_text()) == script_lines(script)

    # Re-running the finished sweep submits nothing.
    before = sorted(p.name for p in (out / "slurm").glob("*_submission.sh"))
    assert run_sweep(plan, SLURM, display=SilentDisplay()) == 0
    assert sorted(p.name for p in (out / "slurm").glob("*_submission.sh")) == before
    assert [s.slurm_job_id for s in statuses(plan)] == [s.slurm_job_id for s in final]


@pytest.mark.slurm
def test_scancel_is_an_infra_failure_and_retry_fixes_it(slurm_cluster: None, dirs: tuple[Path, Path]) -> None:
    out, data = dirs
    plan = make_plan(out, data, 3, seconds=15.0, cluster=fast_cluster(parallelism=3))
    codes: list[int] = []
    shown = ProgressRecord()
    watched = LaunchOptions(backend="slurm", show_progress=True)
    launcher = threading.Thread(target=lambda: codes.append(run_sweep(plan, watched, display=shown)))
    launcher.start()
    first = plan.commands[0].trial
    wait_until(lambda: read_status(first.trial_dir, first.trial_id).state == "running", 60, "trial 0 running")
    job = read_status(first.trial_dir, first.trial_id).slurm_job_id
    assert job
    subprocess.run(["scancel", job], check=True)
    launcher.join(timeout=180)
    assert codes == [1]
    dead = read_status(first.trial_dir, first.trial_id)
    assert (dead.state, dead.failure_class) == ("failed", "infra")
    assert dead.cause == f"slurm job {job} CANCELLED without a result"
    assert [s.state for s in statuses(plan)[1:]] == ["succeeded", "succeeded"]
    # The watching launcher's progress bar followed the array: (finished, running, failed) of 3.
    assert shown.total == 3 and shown.updates[-1] == (3, 0, 1) and shown.stopped
    assert any(running for _, running, _ in shown.updates)
    summary = summarise(out, read_sweep_status(out), utcnow())
    assert [(g.trials, g.failure_class, g.cause) for g in summary.failures] == [(1, "infra", dead.cause)]
    assert summary.finished and summary.eta_s == 0.0

    retry = make_plan(out, data, 3, seconds=1.0, cluster=fast_cluster(parallelism=3))
    options = LaunchOptions(backend="slurm", show_progress=False, retry_failed="infra")
    assert run_sweep(retry, options, display=SilentDisplay()) == 0
    again = read_status(first.trial_dir, first.trial_id)
    assert (again.state, again.attempt) == ("succeeded", 2)
    assert again.slurm_job_id != job
    assert [len(t) for t in timelines(plan)[1:]] == [2, 2]  # the others did not run again


@pytest.mark.slurm
@pytest.mark.slow
def test_requeued_trial_resumes_with_time_carried_over(slurm_cluster: None, dirs: tuple[Path, Path]) -> None:
    out, data = dirs
    plan = make_plan(out, data, 1, mode="checkpoint", seconds=20.0, cluster=fast_cluster(parallelism=1))
    codes: list[int] = []
    launcher = threading.Thread(target=lambda: codes.append(run_sweep(plan, SLURM, display=SilentDisplay())))
    launcher.start()
    trial = plan.commands[0].trial
    wait_until(lambda: read_status(trial.trial_dir, trial.trial_id).state == "running", 60, "trial running")
    # Preempt only after the agent itself has run for 6 s (its own start record), so time used carries over.
    wait_until(lambda: agent_ran_for(trial.trial_dir, 6.0), 60, "six seconds of agent run")
    job = read_status(trial.trial_dir, trial.trial_id).slurm_job_id
    assert job
    # What submitit's job._interrupt() does: preemption = SIGTERM, then the USR2 checkpoint signal.
    subprocess.run(["scancel", job, "--signal", "SIGTERM"], check=True)
    subprocess.run(["scancel", job, "--signal", "USR2"], check=True)
    wait_until(
        lambda: read_status(trial.trial_dir, trial.trial_id).preemptions == 1, 60, "checkpoint recorded"
    )
    mid = read_status(trial.trial_dir, trial.trial_id)
    assert mid.state in ("submitted", "running") and mid.wall_used_s >= 5
    release_requeued(job)  # submitit's `scontrol requeue` (Slurm would hold the job ~120 s)
    launcher.join(timeout=400)
    assert codes == [0], read_status(trial.trial_dir, trial.trial_id)
    done = read_status(trial.trial_dir, trial.trial_id)
    assert (done.state, done.attempt, done.requeues, done.slurm_job_id) == ("succeeded", 1, 1, job)
    assert done.wall_used_s >= 20  # both runs counted
    result = (trial.trial_dir / "result.json").read_text()
    assert '"resumed": 1' in result
    events = [e["event"] for e in timelines(plan)[0]]
    assert events == ["start", "checkpoint", "start", "end"]
    assert [p.name for p in (out / "runs" / "aide").iterdir()] == [trial.trial_dir.name]
