"""Slurm limits on submissions: a sweep larger than the cluster's MaxArraySize (or slurm.max_array_tasks)
becomes several arrays run within one array_parallelism, and a submission sbatch refuses leaves nothing
half-written.

Writes trial dirs and submitit folders under pytest's tmp paths; submits short jobs to the local Slurm.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from launchkit import fast_cluster, make_plan, max_overlap, timelines, wait_until

from mle_world.cli.commands import main
from mle_world.errors import UserError
from mle_world.launch import run_sweep
from mle_world.launch.display import SilentDisplay
from mle_world.launch.launcher import SweepLauncher
from mle_world.launch.slurm.backend import SubmititSubmitter, array_chunks, write_sbatch_preview
from mle_world.launch.slurm.intents import cancel_sweep
from mle_world.launch.slurm.limits import AccountLimits, SubmitLimit
from mle_world.launch.slurm.queries import LiveTask, SlurmView, query_max_array_size, slurm_minutes
from mle_world.launch.state import read_status
from mle_world.plan.cluster import ClusterConfig
from mle_world.plan.sweep_plan import LaunchOptions

SLURM = LaunchOptions(backend="slurm", show_progress=False)


def squeue_ids(job: str) -> str:
    return subprocess.run(
        ["squeue", "-h", "-o", "%i", "-j", job], capture_output=True, text=True
    ).stdout.strip()


def cluster(**slurm: Any) -> ClusterConfig:
    data = fast_cluster(parallelism=2).model_dump()
    data["slurm"].update(slurm)
    return ClusterConfig.model_validate(data)


def test_arrays_stay_within_max_array_size_and_the_configured_cap() -> None:
    """Slurm's default MaxArraySize 1001 allows indices 0..1000: 1575 trials (the full MLE-bench's 75
    tasks × 7 × 3) in one array were refused as a whole ('Invalid job array specification')."""
    assert [len(c) for c in array_chunks(1575, cluster(), 1001)] == [1001, 574]
    assert [len(c) for c in array_chunks(357, cluster(), 1001)] == [357]
    assert [(c.start, c.stop) for c in array_chunks(5, cluster(max_array_tasks=2), 1001)] == [
        (0, 2),
        (2, 4),
        (4, 5),
    ]
    assert [len(c) for c in array_chunks(5, cluster(max_array_tasks=50), 3)] == [3, 2]


@dataclasses.dataclass
class Sbatch:
    """sbatch as a cluster with MaxArraySize 2 answers it, refusing the arrays after `accept` of them."""

    accept: int
    params: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    throttled: list[tuple[str, int, bool]] = dataclasses.field(default_factory=list)

    def submit(self, calls: Sequence[Any], params: dict[str, Any]) -> list[str]:
        if len(self.params) == self.accept:
            raise RuntimeError(
                "sbatch: error: Batch job submission failed: Job violates accounting/QOS policy"
            )
        self.params.append(params)
        return [f"{70 + len(self.params)}_{i}" for i in range(len(calls))]

    def states(self, job_ids: Sequence[str]) -> SlurmView:
        return SlurmView({}, squeue_ok=True, sacct_ok=True)

    def live(self, job_names: Sequence[str]) -> list[LiveTask] | None:
        return []

    def cancel(self, job_ids: Sequence[str]) -> None:
        raise AssertionError("nothing to cancel")

    def max_array_size(self) -> int:
        return 2

    def check_time_limit(self, partition: str | None, minutes: int) -> None:
        pass

    def release(self, array_ids: Sequence[str]) -> bool:
        return True

    def limits(self, slurm: Any) -> None:
        return None

    def throttle(self, array_id: str, limit: int, *, clear_dependency: bool) -> bool:
        self.throttled.append((array_id, limit, clear_dependency))
        return True


def test_a_refused_later_array_keeps_the_earlier_ones_and_says_how_to_go_on(dirs: tuple[Path, Path]) -> None:
    out, data = dirs
    plan = make_plan(out, data, 5, seconds=0.1, cluster=cluster())
    opts = LaunchOptions(backend="slurm", show_progress=False, wait=False)
    sbatch = Sbatch(accept=1)
    runner = SweepLauncher(plan, opts, None, SilentDisplay(), submitter_factory=lambda _f: sbatch)
    with pytest.raises(UserError) as err:
        runner.run()
    assert str(err.value) == (
        "--backend slurm: submission failed: sbatch: Batch job submission failed: Job violates "
        "accounting/QOS policy; 2 of 5 trials were submitted (up to job 71): re-run the same command to "
        "submit the rest"
    )
    states = [read_status(c.trial.trial_dir, c.trial.trial_id) for c in plan.commands]
    assert [(s.state, s.slurm_job_id) for s in states] == [("submitted", "71_0"), ("submitted", "71_1")] + [
        ("pending", None)
    ] * 3
    # The re-run submits the rest after the live array: the two trials of job 71 fill both slots of
    # array_parallelism 2 (a re-run's arrays ran beside the earlier ones: four trials at once).
    sbatch.accept = 3
    assert runner.run() == 0
    assert [(p.get("dependency"), p["array_parallelism"]) for p in sbatch.params] == [
        (None, 2),
        ("afterany:71", 2),
        ("afterany:71:72", 1),
    ]
    # the adopted array (Slurm lists none of its tasks: all may pend): its share, set once
    assert sbatch.throttled == [("71", 2, True)]
    assert [read_status(c.trial.trial_dir, c.trial.trial_id).slurm_job_id for c in plan.commands] == [
        "71_0",
        "71_1",
        "72_0",
        "72_1",
        "73_0",
    ]


@dataclasses.dataclass
class LimitedSlurm(Sbatch):
    """A cluster with MaxSubmitJobsPerUser 2 whose jobs run until `run_paper.py cancel` (run by the
    user at the launcher's first look at the jobs)."""

    output_dir: Path = Path()
    jobs: dict[str, tuple[str, str]] = dataclasses.field(default_factory=dict)  # job id → (name, state)

    def submit(self, calls: Sequence[Any], params: dict[str, Any]) -> list[str]:
        ids = super().submit(calls, params)
        self.jobs.update({job: (params["job_name"], "RUNNING") for job in ids})
        return ids

    def states(self, job_ids: Sequence[str]) -> SlurmView:
        if not (self.output_dir / "slurm" / "cancelled.json").exists():
            cancel_sweep(self.output_dir, self)
        return SlurmView(
            {j: self.jobs[j][1] for j in job_ids if j in self.jobs}, squeue_ok=True, sacct_ok=True
        )

    def live(self, job_names: Sequence[str]) -> list[LiveTask] | None:
        return [LiveTask(j, n, s) for j, (n, s) in self.jobs.items() if n in job_names and s == "RUNNING"]

    def cancel(self, job_ids: Sequence[str]) -> None:
        for job, (name, _) in list(self.jobs.items()):
            if job.split("_")[0] in job_ids:
                self.jobs[job] = (name, "CANCELLED")

    def limits(self, slurm: Any) -> AccountLimits:
        queued = sum(state == "RUNNING" for _, state in self.jobs.values())
        return AccountLimits(None, (SubmitLimit(2, "MaxSubmitJobsPerUser 2 of QOS q (slurm.qos)", queued),))


def test_cancel_also_stops_the_waves_a_watching_launcher_holds_back(dirs: tuple[Path, Path]) -> None:
    """5 trials under MaxSubmitJobsPerUser 2: `cancel` scancelled the first wave, and the watching
    launcher, seeing room again, submitted the next wave: the cancelled sweep went on."""
    out, data = dirs
    plan = make_plan(out, data, 5, seconds=0.1, cluster=cluster())
    slurm = LimitedSlurm(accept=9, output_dir=out)
    said = Said()
    launcher = SweepLauncher(plan, SLURM, None, said, submitter_factory=lambda _f: slurm, poll_s=0.01)
    assert launcher.run() == 1
    assert len(slurm.params) == 1  # the first wave only
    states = [read_status(c.trial.trial_dir, c.trial.trial_id) for c in plan.commands]
    assert [(s.state, s.failure_class) for s in states] == [("failed", "infra")] * 2 + [("pending", None)] * 3
    assert "[launch] slurm: the sweep was cancelled; 3 held-back trial(s) stay pending" in said.lines


@pytest.mark.slurm
def test_max_array_size_is_read_from_the_cluster(slurm_cluster: None) -> None:
    config = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, check=True).stdout
    [line] = [ln for ln in config.splitlines() if ln.startswith("MaxArraySize")]
    assert query_max_array_size() == int(line.split("=")[1])


@pytest.mark.slurm
def test_a_sweep_in_arrays_hands_a_drained_arrays_slot_to_the_next(
    slurm_cluster: None, dirs: tuple[Path, Path]
) -> None:
    """Arrays of 2 under array_parallelism 2: the second array used to wait for the whole first one
    (`afterany`), so a long trial left the other slot idle until it ended. The launcher now gives the
    second array the slot the first no longer needs (`scontrol update ArrayTaskThrottle`), and the
    sweep never runs more than 2 trials at once. Trial 1 ends only when the test says so, after trial
    2 (of the second array) has started beside it."""
    out, data = dirs
    plan = make_plan(out, data, 4, seconds=1.0, cluster=cluster(max_array_tasks=2))
    plan = dataclasses.replace(
        plan,
        commands=tuple(
            dataclasses.replace(c, command=c.command.replace(" ok 1.0", " until 120")) if i == 1 else c
            for i, c in enumerate(plan.commands)
        ),
    )
    said = Said()
    box: list[int] = []
    worker = threading.Thread(target=lambda: box.append(run_sweep(plan, SLURM, display=said)))
    worker.start()
    try:
        third, second = plan.commands[2].trial, plan.commands[1].trial
        wait_until(
            lambda: read_status(third.trial_dir, third.trial_id).state in ("running", "succeeded"),
            120,
            "trial 2 of the second array started while trial 1 runs",
        )
        assert read_status(second.trial_dir, second.trial_id).state == "running"
    finally:
        (plan.commands[1].trial.trial_dir / "go").touch()
        worker.join(300)
    assert box == [0]
    final = [read_status(c.trial.trial_dir, c.trial.trial_id) for c in plan.commands]
    assert [s.state for s in final] == ["succeeded"] * 4
    first, later = final[0].slurm_array_id, final[2].slurm_array_id
    assert first and later and first != later
    assert [s.slurm_job_id for s in final] == [f"{first}_0", f"{first}_1", f"{later}_0", f"{later}_1"]
    assert (
        f"[launch] slurm: job {later} may run 1 trial(s) at once now (array_parallelism 2 across the sweep's arrays)"
        in said.lines
    )
    spans = [(float(t[0]["t"]), float(t[-1]["t"])) for t in timelines(plan)]  # type: ignore[arg-type]
    assert max_overlap(spans) <= 2


class Said(SilentDisplay):
    """A display that keeps the launcher's lines of news."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def say(self, text: str) -> None:
        self.lines.append(text)


@pytest.mark.slurm
def test_a_refused_submission_leaves_nothing_half_written(
    slurm_cluster: None, dirs: tuple[Path, Path], capfd: pytest.CaptureFixture[str]
) -> None:
    """A partition the cluster does not have: one line naming it (submitit also printed sbatch's two
    lines, and the launcher's line kept only the last, which does not name the partition), the trials
    back to pending, no submitit script or pickle left in <output_dir>/slurm/ (the intent stays: it is
    how a re-run would find an array that sbatch queued after all)."""
    out, data = dirs
    plan = make_plan(out, data, 2, seconds=0.1, cluster=cluster(partition="no-such-partition"))
    with pytest.raises(UserError) as err:
        run_sweep(plan, SLURM, display=SilentDisplay())
    assert str(err.value) == (
        "--backend slurm: submission failed: sbatch: invalid partition specified: no-such-partition; "
        "Batch job submission failed: Invalid partition name specified"
    )
    assert capfd.readouterr().err == ""
    assert sorted(p.name for p in (out / "slurm").iterdir()) == ["intents"]
    for c in plan.commands:
        status = read_status(c.trial.trial_dir, c.trial.trial_id)
        assert (status.state, status.attempt, status.slurm_job_id) == ("pending", 0, None)


def test_slurm_time_limits_read_as_minutes() -> None:
    cases = {"30": 30, "30:00": 30, "0:30": 1, "12:00:00": 720, "1-12": 2160, "2-00:00:00": 2880}
    assert {text: slurm_minutes(text) for text in cases} == cases
    assert slurm_minutes("infinite") is None and slurm_minutes("UNLIMITED") is None


@pytest.mark.slurm
def test_a_job_time_above_the_partition_limit_is_refused_before_sbatch(
    slurm_cluster: None, dirs: tuple[Path, Path]
) -> None:
    """With Slurm's default EnforcePartLimits=NO, sbatch accepts a --time above the partition's
    MaxTime and the array pends for ever (PartitionTimeLimit) while the launcher watches: shown here
    with a partition of 10 minutes, created for the test and deleted after it."""
    out, data = dirs
    node = subprocess.run(["sinfo", "-h", "-o", "%N"], capture_output=True, text=True, check=True).stdout
    name = f"mlew-short-{os.getpid()}"
    create = ["scontrol", "create", f"PartitionName={name}", f"Nodes={node.split()[0]}", "MaxTime=10"]
    subprocess.run([*create, "State=UP"], check=True)
    try:
        job = subprocess.run(
            ["sbatch", "--parsable", "-p", name, "--time=11", "-o", "/dev/null", "--wrap", "true"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        try:
            wait_until(
                lambda: (
                    "PartitionTimeLimit"
                    in subprocess.run(
                        ["squeue", "-h", "-j", job, "-o", "%r"], capture_output=True, text=True
                    ).stdout
                ),
                60,
                "the over-long job pending with PartitionTimeLimit",
            )
        finally:
            subprocess.run(["scancel", job], check=False)
        plan = make_plan(out, data, 2, budget_s=600.0, cluster=cluster(partition=name))  # 10 + 3 min
        with pytest.raises(UserError) as err:
            run_sweep(plan, SLURM, display=SilentDisplay())
        assert str(err.value) == (
            f"slurm.partition {name}: time limit 10:00 (10 min), but each trial's job needs 13 min (the "
            "budget + slurm.grading_margin_min): Slurm would keep the array pending for ever "
            "(PartitionTimeLimit); choose a partition with a longer limit, or a smaller budget or margin"
        )
        assert not (out / "slurm" / "intents").exists()
        for c in plan.commands:
            status = read_status(c.trial.trial_dir, c.trial.trial_id)
            assert (status.state, status.attempt) == ("pending", 0)
    finally:
        subprocess.run(["scontrol", "delete", f"PartitionName={name}"], check=False)


@pytest.mark.slurm
def test_cancel_stops_the_sweeps_jobs_and_one_retry_resumes_them(
    slurm_cluster: None, dirs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """`run_paper.py cancel OUTPUT_DIR` scancels the sweep's arrays (found by their submissions' job
    names, so another sweep of the same user is untouched); the same command with --retry-failed then
    records the cancelled trials and reruns them in one go (it took two re-runs: one to record the
    ends, one to rerun them)."""
    out, data = dirs
    plan = make_plan(out, data, 2, seconds=120.0, cluster=cluster())
    other = make_plan(out.with_name("other"), data, 1, seconds=120.0, cluster=cluster())
    run_sweep(other, LaunchOptions(backend="slurm", show_progress=False, wait=False), display=SilentDisplay())
    try:
        run_sweep(
            plan, LaunchOptions(backend="slurm", show_progress=False, wait=False), display=SilentDisplay()
        )
        wait_until(
            lambda: all(
                read_status(c.trial.trial_dir, c.trial.trial_id).state == "running" for c in plan.commands
            ),
            60,
            "both trials running",
        )
        # The sweep's argv as the CLI records it: cancel and status say the exact command to resume.
        (out / "launch.json").write_text(
            json.dumps({"argv": ["--backend", "slurm", "--output-dir", str(out)]})
        )
        resume = shlex.join(["python", "run_paper.py", "--backend", "slurm", "--output-dir", str(out)])
        assert main(["cancel", str(out)]) == 0
        said = capsys.readouterr().out
        array = read_status(plan.commands[0].trial.trial_dir, plan.commands[0].trial.trial_id).slurm_array_id
        assert said.startswith(f"cancelled 2 task(s) (2 running) of job(s) {array}; ")
        assert f"\nnext: {resume} --retry-failed\n" in said
        [theirs] = [read_status(c.trial.trial_dir, c.trial.trial_id) for c in other.commands]
        assert theirs.state in ("submitted", "running")  # the other sweep's job is untouched
        wait_until(lambda: not squeue_ids(str(array)), 60, "the cancelled array gone from squeue")
        assert main(["status", str(out)]) == 0
        shown = capsys.readouterr().out
        assert "ETA: none: every unfinished trial waits for the command below" in shown
        assert f"next: rerun 2 trial(s) no launcher will record: {resume} --retry-failed\n" in shown

        retry = make_plan(out, data, 2, seconds=1.0, cluster=cluster())
        options = LaunchOptions(backend="slurm", show_progress=False, retry_failed="infra")
        assert run_sweep(retry, options, display=SilentDisplay()) == 0
        final = [read_status(c.trial.trial_dir, c.trial.trial_id) for c in plan.commands]
        assert [(s.state, s.attempt) for s in final] == [("succeeded", 2)] * 2
    finally:
        assert main(["cancel", str(out.with_name("other"))]) == 0


@pytest.mark.slurm
def test_status_says_why_slurm_keeps_trials_waiting(
    slurm_cluster: None, dirs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """`status` showed `submitted 2` and nothing of why; Slurm's own reasons (here the array's
    throttle) now come from one squeue."""
    out, data = dirs
    plan = make_plan(out, data, 3, seconds=120.0, cluster=cluster(array_parallelism=1))
    run_sweep(plan, LaunchOptions(backend="slurm", show_progress=False, wait=False), display=SilentDisplay())
    try:
        first = plan.commands[0].trial
        wait_until(lambda: read_status(first.trial_dir, first.trial_id).state == "running", 60, "one running")
        capsys.readouterr()
        assert main(["status", str(out)]) == 0
        assert "pending in Slurm: 2 task(s): JobArrayTaskLimit 2" in capsys.readouterr().out
    finally:
        assert main(["cancel", str(out)]) == 0


@pytest.mark.slurm
def test_gpus_asked_as_gres_for_clusters_without_cons_tres(
    slurm_cluster: None, dirs: tuple[Path, Path]
) -> None:
    """select/cons_res clusters refuse --gpus-per-node; `gpu_request: gres` asks --gres=gpu:N instead,
    and each trial still sees exactly one GPU (setting gpus_per_trial: 0 with a gres of one's own,
    the only way before, also took the GPUs out of the containers)."""
    out, data = dirs
    plan = make_plan(out, data, 2, seconds=1.0, cluster=cluster(gpu_request="gres"))
    assert run_sweep(plan, SLURM, display=SilentDisplay()) == 0
    script = next((out / "slurm").glob("*_submission.sh")).read_text()
    assert "#SBATCH --gres=gpu:1\n" in script and "--gpus-per-node" not in script
    for events in timelines(plan):
        [start] = [e for e in events if e["event"] == "start"]
        assert str(start["gpu"]) in {"0", "1", "2", "3"}


def test_the_dry_runs_sbatch_preview_shows_the_arrays_shares_of_the_limit(dirs: tuple[Path, Path]) -> None:
    """--dry-run --backend slurm: each array's script with the `%` and dependency a launch of the
    idle sweep would give it (it showed every later array as waiting for the previous one)."""
    out, data = dirs
    plan = make_plan(out, data, 5, seconds=0.1, cluster=cluster(max_array_tasks=2, array_parallelism=3))
    paths = write_sbatch_preview(plan, SLURM)
    assert [p.name for p in paths] == [f"mlew-ungated-{n}of3.sbatch" for n in (1, 2, 3)]
    heads = [
        [line for line in p.read_text().splitlines() if line.startswith(("#SBATCH --array", "#SBATCH --dep"))]
        for p in paths
    ]
    assert heads == [
        ["#SBATCH --array=0-1%2"],
        ["#SBATCH --array=0-1%1"],
        ["#SBATCH --dependency='afterany:<array 1>:<array 2>'"],  # one trial: a job, no array
    ]


def test_max_array_size_is_asked_again_when_scontrol_fails_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A busy controller failing one `scontrol show config` must not make the launcher take Slurm's
    default (1001), which would submit a sweep as one array its cluster refuses, or not split it."""
    from mle_world.launch.slurm.queries import query_max_array_size

    calls = tmp_path / "calls"
    fake = tmp_path / "bin" / "scontrol"
    fake.parent.mkdir()
    fake.write_text(
        "#!/bin/sh\n"
        f'echo x >> "{calls}"\n'
        f'[ "$(wc -l < "{calls}")" -ge 2 ] || {{ echo "Socket timed out" >&2; exit 1; }}\n'
        "echo 'MaxArraySize            = 5'\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    assert query_max_array_size() == 5
    assert calls.read_text().count("x") == 2


@pytest.mark.slurm
def test_a_running_arrays_throttle_is_widened_without_touching_its_dependency(
    slurm_cluster: None, tmp_path: Path
) -> None:
    """Once a task of the array runs, Slurm answers `Dependency=` with exit 1 ("Job is no longer
    pending execution") though it applies the throttle to the pending tasks: the launcher took each
    such update for a failure, sent it again at every poll and never said it. The submitter now
    clears the dependency only when asked (ArrayThrottle asks while none of the array's tasks has
    started), and the update succeeds."""
    submitter = SubmititSubmitter(tmp_path)

    def sbatch(*args: str) -> str:
        argv = ["sbatch", "--parsable", "-o", "/dev/null", *args]
        return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()

    def shown(array: str) -> str:
        out = subprocess.run(["scontrol", "show", "job", array], capture_output=True, text=True).stdout
        return " ".join(out.split())

    first = sbatch("--wrap", "sleep 120")
    later = sbatch("--array=0-3%1", f"--dependency=afterany:{first}", "--wrap", "sleep 120")
    try:
        assert "Dependency=afterany" in shown(later)
        assert submitter.throttle(later, 1, clear_dependency=True)
        wait_until(lambda: f"{later}_0 RUNNING" in squeue_states(later), 60, f"{later}_0 started")
        # what the launcher sent before: exit 1, the throttle applied all the same
        assert not submitter.throttle(later, 2, clear_dependency=True)
        assert "ArrayTaskThrottle=2" in shown(later)
        assert submitter.throttle(later, 3, clear_dependency=False)
        assert "ArrayTaskThrottle=3" in shown(later)
        wait_until(lambda: f"{later}_1 RUNNING" in squeue_states(later), 60, f"{later}_1 started")
    finally:
        subprocess.run(["scancel", first, later], check=False)


def squeue_states(job: str) -> str:
    return subprocess.run(["squeue", "-h", "-o", "%i %T", "-j", job], capture_output=True, text=True).stdout
