"""`status` asks Slurm once a poll: one squeue for every array of the sweep, its wait bounded, and sacct
only about jobs squeue no longer lists; a controller that does not answer is said, beside the files' view.

Runs the real squeue and sacct: against private slurm.conf files (SLURM_CONF) whose controller refuses or
never answers, and against the shared local cluster (held arrays of its own, cancelled at the end).
Writes status files under tmp_path.
"""

from __future__ import annotations

import io
import json
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from mle_world.cli.status_view import show_status
from mle_world.launch.slurm import queries
from mle_world.launch.sweep_state import read_sweep_status

STARTED = "2026-01-01T00:00:00+00:00"


def write_trial(out: Path, n: int, state: str, job: str) -> None:
    path = out / "runs" / "aide" / f"iris_seed{n}" / "status.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    fields: dict[str, Any] = {"trial_id": f"gated/aide/iris/seed{n}", "state": state, "backend": "slurm"}
    fields.update(slurm_job_id=job, started_at=STARTED if state == "running" else None)
    path.write_text(json.dumps(fields))


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[list[str], float | None]]:
    """Every Slurm tool run through subprocess.run, with the timeout it was given (the real tools run)."""
    seen: list[tuple[list[str], float | None]] = []
    real = subprocess.run

    def spy(argv: list[str], *args: Any, **kwargs: Any) -> Any:
        if argv and argv[0] in ("squeue", "sacct"):
            seen.append((list(argv), kwargs.get("timeout")))
        return real(argv, *args, **kwargs)

    monkeypatch.setattr(subprocess, "run", spy)
    return seen


@pytest.fixture(params=["refusing", "silent"])
def dead_controller(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """SLURM_CONF naming a controller on a loopback port nothing listens on (squeue retries its connect
    for MessageTimeout: 18 s by default), or one that accepts and never answers."""
    if shutil.which("squeue") is None:
        pytest.skip("squeue is not installed")
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    if request.param == "refusing":
        sock.close()
    else:
        sock.listen(8)
    conf = tmp_path / "slurm-conf" / "slurm.conf"
    conf.parent.mkdir()
    conf.write_text(
        "ClusterName=unreachable\nSlurmctldHost=localhost(127.0.0.1)\n"
        f"SlurmctldPort={port}\nAuthType=auth/munge\n"
        "NodeName=localhost CPUs=1 State=UNKNOWN\nPartitionName=p Nodes=localhost Default=YES\n"
    )
    monkeypatch.setenv("SLURM_CONF", str(conf))
    # The bound, made short so the test does not wait out the real one: what is asserted is that squeue
    # gets it, once.
    monkeypatch.setattr(queries, "QUEUE_TIMEOUT_S", 0.5)
    yield
    sock.close()


def test_a_controller_that_does_not_answer_costs_one_bounded_squeue(
    dead_controller: None, calls: list[tuple[list[str], float | None]], tmp_path: Path
) -> None:
    out = tmp_path / "sweep"
    out.mkdir()
    (out / "launch.json").write_text(json.dumps({"argv": ["--regime", "gated", "--backend", "slurm"]}))
    # Three arrays, no launcher: before, a squeue for the states, one for the pending reasons, and sacct.
    for n, (state, job) in enumerate([("running", "101_0"), ("submitted", "102_3"), ("submitted", "103_7")]):
        write_trial(out, n, state, job)
    sweep = read_sweep_status(out)
    assert [argv[0] for argv, _ in calls] == ["squeue"]
    argv, timeout = calls[0]
    assert timeout == 0.5
    assert argv[argv.index("-j") + 1] == "101,102,103"
    assert sweep.slurm_unreachable == "squeue did not answer within 0.5 s"
    assert sweep.ended_jobs == () and sweep.pending == ()

    console = Console(file=io.StringIO(), width=300, record=True)
    show_status(out, console)
    text = console.export_text()
    assert [argv[0] for argv, _ in calls] == ["squeue", "squeue"]  # the second poll: one more
    assert "Slurm unreachable: squeue did not answer within 0.5 s" in text
    # Beside it, the view of the files: the counts and the running trial.
    assert sweep.counts() == {"running": 1, "submitted": 2}
    # The table's title holds tmp_path and wraps at the table's width: where depends on the path's length.
    words = " ".join(text.split())
    assert "3 trials" in words and "gated/aide/iris/seed0" in words.split("launcher: none running")[1]


def sbatch(*args: str) -> str:
    argv = ["sbatch", "--parsable", "-o", "/dev/null", "-J", "mlew-test-poll", "-t", "5", *args]
    proc = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60)
    return proc.stdout.split(";")[0].strip()


@pytest.mark.slurm
def test_one_squeue_a_poll_whatever_the_number_of_arrays(
    slurm_cluster: None, calls: list[tuple[list[str], float | None]], tmp_path: Path
) -> None:
    """Held arrays wait for ever (JobHeldUser) and run nothing on the shared cluster; a cancelled job is
    the one sacct is asked about."""
    from launchkit import wait_until

    arrays = [sbatch("-H", "--array=0-2", "--wrap", "true") for _ in range(4)]
    dead = sbatch("--wrap", "sleep 300")
    try:
        subprocess.run(["scancel", dead], check=True, timeout=60)
        wait_until(lambda: (queries.query_accounting([dead]) or {}).get(dead) == "CANCELLED", 60, "CANCELLED")
        calls.clear()
        out = tmp_path / "sweep"
        out.mkdir()
        (out / "launch.json").write_text(json.dumps({"argv": ["--regime", "gated", "--backend", "slurm"]}))
        for n, job in enumerate(f"{a}_{i}" for a in arrays for i in range(3)):
            write_trial(out, n, "submitted", job)
        write_trial(out, 99, "running", dead)

        sweep = read_sweep_status(out)
        squeues = [argv for argv, _ in calls if argv[0] == "squeue"]
        saccts = [argv for argv, _ in calls if argv[0] == "sacct"]
        assert len(squeues) == 1 and calls[0][1] == queries.QUEUE_TIMEOUT_S
        assert squeues[0][squeues[0].index("-j") + 1] == ",".join(sorted([*arrays, dead]))
        assert len(saccts) == 1 and saccts[0][saccts[0].index("-j") + 1] == dead  # only the job gone
        assert sweep.slurm_unreachable is None
        assert dict(sweep.pending) == {"JobHeldUser": 12}
        assert sweep.ended_jobs == (("gated/aide/iris/seed99", f"{dead} CANCELLED"),)
    finally:
        subprocess.run(["scancel", *arrays, dead], timeout=60, check=False)


@pytest.mark.slurm
def test_an_array_cancelled_before_any_task_started_ends_each_of_its_trials(
    slurm_cluster: None, tmp_path: Path
) -> None:
    """sacct keeps such an array as one record under the array's own id (no task ids): its tasks were
    'submitted' for ever in `status`, and `status --watch` never returned."""
    from launchkit import wait_until

    array = sbatch("-H", "--array=0-2", "--wrap", "true")
    tasks = [f"{array}_{i}" for i in range(3)]
    try:
        subprocess.run(["scancel", array], check=True, timeout=60)
        wait_until(
            lambda: set((queries.query_accounting([array]) or {}).values()) == {"CANCELLED"}, 60, "sacct"
        )
        listed = queries.query_accounting([array]) or {}
        # The record as sacct has it: usually the array's alone (no task of its own: what the fix is for);
        # now and then the controller has split it into its tasks first (a CI run saw 721_0..2).
        assert listed in ({array: "CANCELLED"}, dict.fromkeys(tasks, "CANCELLED")), listed
        by_task = queries.query_accounting(tasks) or {}
        assert all(by_task.get(t) == "CANCELLED" for t in tasks), by_task
        out = tmp_path / "sweep"
        out.mkdir()
        (out / "launch.json").write_text(json.dumps({"argv": ["--regime", "gated", "--backend", "slurm"]}))
        for n, job in enumerate(tasks):
            write_trial(out, n, "submitted", job)
        sweep = read_sweep_status(out)
        assert sorted(sweep.ended_jobs) == [
            (f"gated/aide/iris/seed{n}", f"{tasks[n]} CANCELLED") for n in range(3)
        ]
        view = queries.query_states(tasks)  # what a watching launcher asks
        assert all(view.states[t] == "CANCELLED" for t in tasks) and not any(map(view.known_gone, tasks))
    finally:
        subprocess.run(["scancel", array], timeout=60, check=False)
