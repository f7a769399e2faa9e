"""A sweep split into arrays on the real local Slurm with MaxArraySize 5: a launcher killed between its
arrays resumes, `cancel` stops every array, `--retry-failed` reruns them all, and every trial runs once.

Sets MaxArraySize=5 in the local Slurm's slurm.conf with `scontrol reconfigure` for this module and
puts the file back after it (slurmctld 22.05 then *reports* 5, which is what the launcher reads, while it
keeps enforcing the limit it started with: other sessions' submissions are never refused meanwhile; the
arrays here are checked against 5 by their indices). Writes trial dirs under pytest's tmp paths.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from launchkit import make_plan, max_overlap, timelines, wait_until

from mle_world.cli.commands import main
from mle_world.launch import run_sweep
from mle_world.launch.display import SilentDisplay
from mle_world.launch.slurm.intents import KILL_AT_ENV
from mle_world.launch.slurm.queries import query_max_array_size
from mle_world.launch.state import read_status
from mle_world.plan.sweep_plan import LaunchOptions
from mle_world.records import TrialStatus

pytestmark = pytest.mark.slurm
DRIVE = Path(__file__).parents[1] / "support" / "drive.py"
SLURM_CONF = Path("/etc/slurm/slurm.conf")


def reconfigure(text: str) -> None:
    SLURM_CONF.write_text(text)
    subprocess.run(["scontrol", "reconfigure"], check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def max_array_size_5(slurm_cluster: None) -> Iterator[None]:
    original = SLURM_CONF.read_text()
    if not re.search(r"^MaxArraySize=\d+$", original, re.M):
        pytest.skip(f"{SLURM_CONF} sets no MaxArraySize line to change")
    reconfigure(re.sub(r"^MaxArraySize=\d+$", "MaxArraySize=5", original, flags=re.M))
    try:
        wait_until(lambda: query_max_array_size() == 5, 30, "slurmctld reporting MaxArraySize 5")
        yield
    finally:
        reconfigure(original)


def statuses(out: Path, data: Path, n: int) -> list[TrialStatus]:
    return [read_status(c.trial.trial_dir, c.trial.trial_id) for c in make_plan(out, data, n).commands]


def arrays_of(final: list[TrialStatus]) -> dict[str, list[int]]:
    """Each array's task indices, from the trials' job ids."""
    out: dict[str, list[int]] = {}
    for s in final:
        array, _, index = (s.slurm_job_id or "").partition("_")
        out.setdefault(array, []).append(int(index))
    return out


def starts(out: Path, data: Path, n: int) -> list[int]:
    return [sum(e["event"] == "start" for e in t) for t in timelines(make_plan(out, data, n))]


def accounted(out: Path) -> list[tuple[str, str]]:
    """Every task Slurm accounted for under the sweep's submissions (JobID, State)."""
    names = [json.loads(p.read_text())["job_name"] for p in (out / "slurm" / "intents").glob("*.json")]
    argv = ["sacct", "-X", "-P", "-n", "-o", "JobID,State", "-S", "now-3hours", "--name", ",".join(names)]
    lines = subprocess.run(argv, capture_output=True, text=True, check=True).stdout.splitlines()
    return [(job, state.split()[0]) for job, _, state in (line.partition("|") for line in lines if line)]


def test_a_launcher_killed_between_its_arrays_resumes_and_every_trial_runs_once(
    max_array_size_5: None, dirs: tuple[Path, Path]
) -> None:
    """7 trials → arrays of 5 and 2. The launcher is SIGKILLed once the first array's 5 job ids are
    recorded (held, not released; the second array not submitted). The re-run adopts and releases
    the first array, submits the second after it, and the whole sweep runs at most 2 trials at once."""
    out, data = dirs
    argv = [sys.executable, str(DRIVE), str(out), str(data), "7", "ok", "1", "slurm", "--parallelism", "2"]
    killed = subprocess.run(
        argv, env={**os.environ, KILL_AT_ENV: "recorded-5"}, capture_output=True, text=True, timeout=120
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    first = statuses(out, data, 7)
    assert [(s.state, bool(s.slurm_job_id)) for s in first] == [("submitted", True)] * 5 + [
        ("pending", False)
    ] * 2
    rerun = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    adopted = first[0].slurm_array_id
    assert f"reconciled with squeue: adopted live tasks 5 of array {adopted}" in rerun.stderr
    assert "submitted 2 trials as job" in rerun.stderr and f"after job(s) {adopted})" in rerun.stderr
    final = statuses(out, data, 7)
    assert [(s.state, s.attempt) for s in final] == [("succeeded", 1)] * 7
    arrays = arrays_of(final)
    assert [sorted(i) for i in arrays.values()] == [[0, 1, 2, 3, 4], [0, 1]]
    assert starts(out, data, 7) == [1] * 7  # every agent started exactly once
    spans = [(float(t[0]["t"]), float(t[-1]["t"])) for t in timelines(make_plan(out, data, 7))]
    assert max_overlap(spans) <= 2  # one array_parallelism across both arrays
    wait_until(lambda: len(accounted(out)) == 7, 60, "accounting of 7 tasks")
    assert sorted(accounted(out)) == sorted((s.slurm_job_id or "", "COMPLETED") for s in final)


def test_cancel_stops_every_array_and_one_retry_reruns_them_all(
    max_array_size_5: None, dirs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """7 long trials in arrays of 5 and 2 (the second waiting for the first): `cancel` scancels both,
    running and waiting ones; the same sweep with --retry-failed reruns all 7 in one go, again in two
    arrays, and only the trials that had started run a second time."""
    out, data = dirs
    options = LaunchOptions(backend="slurm", show_progress=False, wait=False)
    plan = make_plan(out, data, 7, seconds=120.0)
    assert run_sweep(plan, options, display=SilentDisplay()) == 0
    first = statuses(out, data, 7)
    arrays = list(arrays_of(first))
    assert len(arrays) == 2
    # the agents' own start lines: a status says running a moment before its agent is up
    wait_until(lambda: sum(starts(out, data, 7)) == 2, 90, "2 agents started")
    capsys.readouterr()
    assert main(["cancel", str(out)]) == 0
    said = capsys.readouterr().out
    assert said.startswith(f"cancelled 7 task(s) (2 running) of job(s) {arrays[0]}, {arrays[1]}; "), said
    ran = [n for n, count in enumerate(starts(out, data, 7)) if count]
    assert len(ran) == 2
    wait_until(
        lambda: (
            not subprocess.run(
                ["squeue", "-h", "-j", ",".join(arrays)], capture_output=True, text=True
            ).stdout.strip()
        ),
        60,
        "the cancelled arrays gone from squeue",
    )
    retry = make_plan(out, data, 7, seconds=1.0)
    again = LaunchOptions(backend="slurm", show_progress=False, retry_failed="infra")
    assert run_sweep(retry, again, display=SilentDisplay()) == 0
    final = statuses(out, data, 7)
    assert [(s.state, s.attempt) for s in final] == [("succeeded", 2)] * 7
    assert [sorted(i) for i in arrays_of(final).values()] == [[0, 1, 2, 3, 4], [0, 1]]
    assert set(arrays_of(final)).isdisjoint(arrays)
    assert starts(out, data, 7) == [2 if n in ran else 1 for n in range(7)]
