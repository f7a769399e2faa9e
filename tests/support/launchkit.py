"""Builders for launch tests: a SweepPlan of N synthetic trials whose command is tests/support/fake_agent.py,
a status.json set-up writer, and a helper that lets a requeued Slurm job start at once.

Reads configs/demo.yaml; writes status.json only through `update_status` (the tests' tmp dirs are
otherwise written by the launcher).
"""

from __future__ import annotations

import dataclasses
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from mle_world.launch.state import StatusFields, transact
from mle_world.plan.config import ClusterConfig, load_paper_config
from mle_world.plan.render import RuntimeSpec, view_paths
from mle_world.plan.sweep import Selection, expand
from mle_world.plan.sweep_plan import SweepPlan, TrialCommand
from mle_world.records import BudgetSettings, LaunchRecord, TrialStatus

REPO = Path(__file__).resolve().parents[2]
FAKE_AGENT = Path(__file__).with_name("fake_agent.py")


def make_plan(
    output_dir: Path,
    data_dir: Path,
    n: int,
    *,
    mode: str | Callable[[int], str] = "ok",
    seconds: float = 1.0,
    budget_s: float = 300.0,
    cluster: ClusterConfig | None = None,
    prepare: bool = True,
    config_name: str = "aide",
) -> SweepPlan:
    config = load_paper_config(REPO / "configs" / "demo.yaml", lambda _t: True)
    budget = BudgetSettings.model_validate({**config.budget.model_dump(), "time_limit_s": budget_s})
    config = dataclasses.replace(config, budget=budget)
    tasks = tuple(f"task{i:02d}" for i in range(n))
    runtime = RuntimeSpec(runtime="process", sandbox=False, python=sys.executable)
    trials = expand(
        config,
        "ungated",
        Selection(tasks=tasks, configurations=(config_name,)),
        output_dir=output_dir,
        data_dir=data_dir,
        known_task=lambda _t: True,
        view=lambda trial_dir, public: view_paths(runtime, trial_dir, public),
    )
    commands = []
    for i, trial in enumerate(trials):
        if prepare:
            trial.public_dir.mkdir(parents=True, exist_ok=True)
            trial.private_dir.mkdir(parents=True, exist_ok=True)
        m = mode(i) if callable(mode) else mode
        command = " ".join(shlex.quote(a) for a in (sys.executable, str(FAKE_AGENT), m, str(seconds)))
        commands.append(TrialCommand(trial=trial, command=command))
    record = LaunchRecord(
        argv=("test",),
        harness_version="0",
        git_sha=None,
        created_at=datetime.now(UTC),
        regime="ungated",
        config_path="demo.yaml",
        config_hash="h" * 64,
        cluster_path=None,
        backend="local",
        runtime="process",
        dry_run=False,
        sandbox=False,
        data_dir=str(data_dir),
        endpoints=(),
        trials=(),
    )
    return SweepPlan(
        output_dir=output_dir,
        data_dir=data_dir,
        regime="ungated",
        commands=tuple(commands),
        runtime=runtime,
        cluster=cluster or fast_cluster(),
        record=record,
        config_hash="h" * 64,
    )


def update_status(
    trial_dir: Path,
    trial_id: str,
    to: str | None = None,
    *,
    only_if: Callable[[TrialStatus], bool] | None = None,
    **fields: Any,
) -> TrialStatus | None:
    """Test set-up: put a trial in a given state with any fields, under the status lock and the
    `ALLOWED` check (the launcher itself writes only through the named transitions of
    `mle_world.launch.state`). None when `only_if` rejected the current status."""

    def change(current: TrialStatus) -> StatusFields | None:
        if only_if is not None and not only_if(current):
            return None
        return cast(StatusFields, {**fields, "state": to} if to is not None else fields)

    return transact(trial_dir, trial_id, change)


def fast_cluster(parallelism: int = 2, grace_s: float = 5.0, max_attempts: int = 3) -> ClusterConfig:
    return ClusterConfig.model_validate(
        {
            "slurm": {
                "partition": "gpu",
                "gpus_per_trial": 1,
                "cpus_per_trial": 1,
                "mem_gb": 1,
                "array_parallelism": parallelism,
                "grading_margin_min": 3,  # > wall_grace_s + 120 s (ClusterConfig)
                "query_interval_s": 0,
            },
            "launch": {"max_attempts": max_attempts, "wall_grace_s": grace_s},
        }
    )


def timelines(plan: SweepPlan) -> list[list[dict[str, object]]]:
    """Per trial, the fake agent's timeline events."""
    import json

    out = []
    for run in plan.commands:
        path = run.trial.trial_dir / "timeline.jsonl"
        lines = path.read_text().splitlines() if path.exists() else []
        out.append([json.loads(line) for line in lines])
    return out


def max_overlap(intervals: list[tuple[float, float]]) -> int:
    events = sorted(
        [(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals], key=lambda x: (x[0], x[1])
    )
    best = cur = 0
    for _, delta in events:
        cur += delta
        best = max(best, cur)
    return best


def _steps_alive(job: str) -> bool:
    """Any slurmstepd of this job still on the (local) node: its last run is still being torn down."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if cmdline.read_bytes().startswith(f"slurmstepd: [{job}.".encode()):
                return True
        except OSError:
            continue
    return False


def release_requeued(job: str, timeout: float = 120.0) -> None:
    """Slurm holds a requeued job ~120 s (the credential revocation window) before it is eligible
    again; let it start now (`scontrol update StartTime=now`) once it is pending, its last run is torn
    down and the clock has left the second of the revocation (slurmd refuses a credential issued in
    the same second: "Job credential revoked"). Requeue tests then take seconds, not minutes."""
    deadline = time.time() + timeout
    pending_since = None
    while time.time() < deadline:
        state = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True).stdout
        if state.strip() == "PENDING" and not _steps_alive(job):
            pending_since = pending_since or time.time()
            if time.time() > pending_since + 2:
                subprocess.run(["scontrol", "update", f"jobid={job}", "StartTime=now"], check=False)
                return
        time.sleep(0.5)
    raise AssertionError(f"job {job} not pending again after {timeout} s")


def wait_until(predicate: Callable[[], object], timeout: float, what: str) -> None:
    """Poll `predicate` every 0.5 s until it is true; fail naming `what` after `timeout` seconds."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")
