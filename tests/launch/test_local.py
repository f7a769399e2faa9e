"""Local backend and per-trial job: GPU exclusivity, wall limit, classification, resume, retry, Ctrl-C.

Writes trial directories under pytest's tmp paths; runs tests/support/fake_agent.py as the agent.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from launchkit import REPO, fast_cluster, make_plan, max_overlap, timelines, update_status
from private_tmpfs import in_private_tmpfs
from rich.console import Console

from mle_world.audit.cache import stamp_of
from mle_world.audit.digest import write_trial_digest
from mle_world.cli.status_view import show_status
from mle_world.errors import NotPreparedError, UserError
from mle_world.identity import check_sweep_identity
from mle_world.launch import check_prepared, parse_gpu_devices, run_sweep
from mle_world.launch.display import SilentDisplay
from mle_world.launch.launcher import make_job
from mle_world.launch.liveness import launcher_lock
from mle_world.launch.post_trial import TrialFinisher
from mle_world.launch.state import StateError, read_status
from mle_world.launch.trial import TrialSupervisor, to_grade
from mle_world.layout import STATUS, cost_path, digest_beside, report_beside
from mle_world.plan.sweep_plan import LaunchOptions

SUPPORT = Path(__file__).resolve().parents[1] / "support"


def options(**kw: object) -> LaunchOptions:
    base: dict[str, object] = {
        "backend": "local",
        "n_workers": 2,
        "gpu_devices": ("0", "1"),
        "show_progress": False,
    }
    base.update(kw)
    return LaunchOptions(**base)  # type: ignore[arg-type]


def states(plan) -> list[str]:  # type: ignore[no-untyped-def]
    return [read_status(r.trial.trial_dir, r.trial.trial_id).state for r in plan.commands]


def test_parse_gpu_devices() -> None:
    assert parse_gpu_devices("0,1,2,3") == ("0", "1", "2", "3")
    assert parse_gpu_devices("0-3") == ("0", "1", "2", "3")
    assert parse_gpu_devices("0-1, 4") == ("0", "1", "4")
    for bad in ("a", "3-1", "0,0", "0-2,1", ""):
        with pytest.raises(UserError, match="--gpu-device"):
            parse_gpu_devices(bad)


def test_state_machine_refuses_illegal_transitions(tmp_path: Path) -> None:
    update_status(tmp_path, "t", "submitted", attempt=1)
    update_status(tmp_path, "t", "running")
    done = update_status(tmp_path, "t", "succeeded")
    assert done is not None and done.attempt == 1 and done.updated_at is not None
    with pytest.raises(StateError):
        update_status(tmp_path, "t", "running")
    assert update_status(tmp_path, "t", "failed", only_if=lambda s: s.state != "succeeded") is None


def test_three_workers_never_share_a_gpu(dirs: tuple[Path, Path]) -> None:
    out, data = dirs
    plan = make_plan(out, data, 9, seconds=0.6)
    code = run_sweep(
        plan, options(n_workers=3, gpu_devices=parse_gpu_devices("0,1,2")), display=SilentDisplay()
    )
    assert code == 0
    assert states(plan) == ["succeeded"] * 9
    spans: dict[str, list[tuple[float, float]]] = {}
    allspans = []
    for events in timelines(plan):
        start = next(e for e in events if e["event"] == "start")
        end = next(e for e in events if e["event"] == "end")
        spans.setdefault(str(start["gpu"]), []).append((float(start["t"]), float(end["t"])))  # type: ignore[arg-type]
        allspans.append((float(start["t"]), float(end["t"])))  # type: ignore[arg-type]
    assert set(spans) <= {"0", "1", "2"}
    assert all(max_overlap(s) == 1 for s in spans.values())
    assert max_overlap(allspans) <= 3
    status = read_status(plan.commands[0].trial.trial_dir, plan.commands[0].trial.trial_id)
    assert status.gpu in {"0", "1", "2"} and status.host and status.attempt == 1 and status.backend == "local"
    assert json.loads((plan.commands[0].trial.trial_dir / "spec.json").read_text())["science_hash"]


def test_trials_per_gpu_allows_sharing(dirs: tuple[Path, Path]) -> None:
    out, data = dirs
    plan = make_plan(out, data, 4, seconds=0.8)
    code = run_sweep(
        plan, options(n_workers=4, gpu_devices=("0",), trials_per_gpu=2), display=SilentDisplay()
    )
    assert code == 0
    spans = [
        (float(ev[0]["t"]), float(ev[-1]["t"]))  # type: ignore[arg-type]
        for ev in timelines(plan)
    ]
    assert max_overlap(spans) == 2


def test_wall_limit_kills_the_process_group(dirs: tuple[Path, Path]) -> None:
    out, data = dirs
    plan = make_plan(out, data, 1, mode="hang", seconds=60, budget_s=1.0, cluster=fast_cluster(grace_s=1.0))
    job = make_job(plan.commands[0], plan, "local")
    job = job.__class__(**{**job.__dict__, "kill_grace_s": 1.0})
    update_status(job.trial_dir, job.trial_id, "submitted", attempt=1, backend="local")
    runner = TrialSupervisor(job, gpu="0", post_trial=None, resume_state="pending")
    assert runner.run() == "failed"  # the agent hangs for 60 s: only the wall limit ends it sooner
    status = read_status(job.trial_dir, job.trial_id)
    assert status.state == "failed" and status.failure_class == "infra"
    assert status.cause == "wall limit 1+1 s exceeded"
    pid = json.loads((job.trial_dir / "timeline.jsonl").read_text().splitlines()[0])["pid"]
    # the whole group, including the background `sleep` the agent left behind, is gone
    deadline = time.monotonic() + 30
    while group_members(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert group_members(pid) == []


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group, from /proc."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            out.append(int(stat.parent.name))
    return out


@pytest.mark.parametrize(
    ("mode", "klass", "cause"),
    [
        ("agent-fail", "agent", "agent failed: gave up: no valid submission"),
        ("infra-fail", "infra", "agent failed: endpoint_unavailable"),
        ("crash", "infra", "exit 1 without result.json: Traceback: boom"),
    ],
)
def test_failures_are_classified(dirs: tuple[Path, Path], mode: str, klass: str, cause: str) -> None:
    out, data = dirs
    plan = make_plan(out, data, 1, mode=mode, seconds=0.1)
    assert run_sweep(plan, options(), display=SilentDisplay()) == 1
    status = read_status(plan.commands[0].trial.trial_dir, plan.commands[0].trial.trial_id)
    assert (status.state, status.failure_class, status.cause) == ("failed", klass, cause)


def test_post_trial_hook_runs_and_its_crash_is_infra(dirs: tuple[Path, Path]) -> None:
    out, data = dirs
    plan = make_plan(out, data, 2, seconds=0.1)
    seen: list[str] = []

    def hook(trial, state) -> None:  # type: ignore[no-untyped-def]
        seen.append(trial.trial_id)
        if trial.spec.task == "task01":
            raise RuntimeError("grader exploded")

    assert run_sweep(plan, options(), post_trial=hook, display=SilentDisplay()) == 1
    assert sorted(seen) == sorted(r.trial.trial_id for r in plan.commands)
    bad = read_status(plan.commands[1].trial.trial_dir, plan.commands[1].trial.trial_id)
    assert (
        bad.failure_class == "infra" and bad.cause == "post-trial hook failed: RuntimeError: grader exploded"
    )


def test_failed_trials_that_left_a_submission_are_graded(dirs: tuple[Path, Path]) -> None:
    """MLE-bench grades whatever the agent left: the hook also runs for a failed trial with a submission."""
    out, data = dirs
    plan = make_plan(out, data, 3, mode=lambda i: "ok" if i == 0 else "infra-fail", seconds=0.1)
    left = plan.commands[1].trial.trial_dir / "submission" / "submission.csv"
    left.parent.mkdir(parents=True)
    left.write_text("id,target\n1,0\n")
    seen: dict[str, str] = {}

    def hook(trial, state) -> None:  # type: ignore[no-untyped-def]
        seen[trial.trial_id] = state

    assert run_sweep(plan, options(), post_trial=hook, display=SilentDisplay()) == 1
    ids = [r.trial.trial_id for r in plan.commands]
    # Every ended trial reaches the hook (its costs are spent); the hook grades what `to_grade` says.
    assert seen == {ids[0]: "succeeded", ids[1]: "failed", ids[2]: "failed"}
    assert [to_grade(seen[i], r.trial.trial_dir) for i, r in zip(ids, plan.commands, strict=True)] == [
        True,
        True,
        False,
    ]
    failed = read_status(plan.commands[1].trial.trial_dir, ids[1])
    assert failed.state == "failed" and failed.failure_class == "infra"


def test_a_failed_trial_without_a_submission_gets_its_cost_csv_and_no_report(dirs: tuple[Path, Path]) -> None:
    """Its calls and executions were spent: without a cost CSV its spend was in no total (the post-trial
    step ran only for trials it graded). It is not graded: no report, so the audit settles it as before."""
    out, data = dirs
    plan = make_plan(out, data, 2, mode=lambda i: ("crash", "agent-fail")[i], seconds=0.1)
    finisher = TrialFinisher(out, data, REPO / "configs" / "prices.yaml", grade=True)
    assert run_sweep(plan, options(), post_trial=finisher, display=SilentDisplay()) == 1
    for cmd in plan.commands:
        trial = cmd.trial
        status = read_status(trial.trial_dir, trial.trial_id)
        assert status.state == "failed" and "post-trial" not in (status.cause or "")
        assert cost_path(out, trial.spec.configuration, trial.spec.task, trial.spec.seed).is_file()
        assert not report_beside(trial.trial_dir).exists()


def test_the_finisher_writes_the_audit_digest_once_the_end_is_recorded_and_a_failure_to_is_none_of_the_trial(
    dirs: tuple[Path, Path],
) -> None:
    out, data = dirs
    plan = make_plan(out, data, 2, mode=lambda i: "agent-fail", seconds=0.1)
    digested: list[Path] = []

    def digest(trial_dir: Path, cost: Path) -> None:
        digested.append(trial_dir)
        if len(digested) == 1:
            raise OSError(28, "No space left on device")
        write_trial_digest(trial_dir, cost)

    finisher = TrialFinisher(out, data, REPO / "configs" / "prices.yaml", grade=True, digest=digest)
    assert run_sweep(plan, options(), post_trial=finisher, display=SilentDisplay()) == 1
    assert sorted(digested) == sorted(cmd.trial.trial_dir for cmd in plan.commands)
    for cmd in plan.commands:
        trial = cmd.trial
        status = read_status(trial.trial_dir, trial.trial_id)
        assert status.state == "failed" and status.failure_class != "infra", status
        cost = cost_path(out, trial.spec.configuration, trial.spec.task, trial.spec.seed)
        kept = digest_beside(trial.trial_dir)
        if trial.trial_dir == digested[0]:
            assert not kept.exists()
        else:
            # Written after status.json said how the trial ended: the dir and the status as they are now.
            held = json.loads(kept.read_text())
            assert held["cost"][0] == stamp_of(str(cost))
            status_file = trial.trial_dir / STATUS
            assert held["status"] == [stamp_of(str(status_file)), status_file.read_text()]
            assert held["dir"][0] == stamp_of(str(trial.trial_dir))


def test_resume_skips_done_and_retry_rules(dirs: tuple[Path, Path]) -> None:
    out, data = dirs
    modes = {0: "ok", 1: "crash", 2: "agent-fail"}
    plan = make_plan(out, data, 3, mode=lambda i: modes[i], seconds=0.1)
    assert run_sweep(plan, options(), display=SilentDisplay()) == 1

    def starts() -> list[int]:
        return [sum(1 for e in ev if e["event"] == "start") for ev in timelines(plan)]

    assert starts() == [1, 1, 1]
    assert run_sweep(plan, options(), display=SilentDisplay()) == 1  # plain re-run: nothing runs
    assert starts() == [1, 1, 1]
    assert run_sweep(plan, options(retry_failed="infra"), display=SilentDisplay()) == 1  # only the crash
    assert starts() == [1, 2, 1]
    assert read_status(plan.commands[1].trial.trial_dir, plan.commands[1].trial.trial_id).attempt == 2
    assert run_sweep(plan, options(retry_failed="all"), display=SilentDisplay()) == 1
    assert starts() == [1, 3, 2]
    # max_attempts (3) reached for the crashing trial
    assert run_sweep(plan, options(retry_failed="all"), display=SilentDisplay()) == 1
    assert starts() == [1, 3, 3]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_or_sigterm_stops_children_and_leaves_pending(dirs: tuple[Path, Path], sig: int) -> None:
    """SIGTERM (timeout, systemd, the end of an salloc) is handled exactly like Ctrl-C."""
    out, data = dirs
    argv = [sys.executable, str(SUPPORT / "drive.py"), str(out), str(data), "4", "ok", "60", "local"]
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    plan = make_plan(out, data, 4, seconds=60)
    deadline = time.time() + 30

    def started() -> list[Path]:
        return [r.trial.trial_dir for r in plan.commands if (r.trial.trial_dir / "timeline.jsonl").exists()]

    while time.time() < deadline and (states(plan).count("running") < 2 or len(started()) < 2):
        time.sleep(0.2)
    assert states(plan).count("running") == 2 and len(started()) == 2
    pids = [
        json.loads((r.trial.trial_dir / "timeline.jsonl").read_text().splitlines()[0])["pid"]
        for r in plan.commands
        if (r.trial.trial_dir / "timeline.jsonl").exists()
    ]
    proc.send_signal(sig)
    assert proc.wait(timeout=60) == 130, proc.stderr.read() if proc.stderr else ""
    assert states(plan) == ["pending"] * 4
    assert all(read_status(r.trial.trial_dir, r.trial.trial_id).attempt == 0 for r in plan.commands)
    reason = "Ctrl-C" if sig == signal.SIGINT else "SIGTERM"
    causes = [
        read_status(r.trial.trial_dir, r.trial.trial_id).cause
        for r in plan.commands
        if r.trial.trial_dir in started()
    ]
    assert causes == [f"interrupted ({reason}); resumable"] * 2, causes
    assert len(started()) == 2 and all((d / "ckpt.json").exists() for d in started())
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    # the interrupted trials resume (the fake agent's checkpoint counts the restart)
    plan = make_plan(out, data, 4, seconds=0.2, budget_s=300.0)
    assert run_sweep(plan, options(), display=SilentDisplay()) == 0


def test_stale_running_trial_is_resumed(dirs: tuple[Path, Path]) -> None:
    out, data = dirs
    plan = make_plan(out, data, 1, seconds=0.1)
    run = plan.commands[0]
    update_status(run.trial.trial_dir, run.trial.trial_id, "submitted", attempt=1, backend="local")
    update_status(run.trial.trial_dir, run.trial.trial_id, "running", pid=999999)
    assert run_sweep(plan, options(), display=SilentDisplay()) == 0
    assert read_status(run.trial.trial_dir, run.trial.trial_id).attempt == 1


def test_check_prepared_names_missing_tasks(dirs: tuple[Path, Path]) -> None:
    out, data = dirs
    plan = make_plan(out, data, 3, prepare=False)
    trials = [r.trial for r in plan.commands]
    with pytest.raises(NotPreparedError) as info:
        check_prepared(trials, data, local={"task02"})
    msg = str(info.value)
    assert msg.startswith(f"--data-dir {data}: 3 tasks not prepared: task00, task01, task02; run: ")
    assert "mlebench prepare -c" in msg and "run_paper.py prepare --tasks task02" in msg
    assert "\n" not in msg
    for t in trials:
        t.public_dir.mkdir(parents=True)
        t.private_dir.mkdir(parents=True)
    check_prepared(trials, data)


def test_identity_and_spec_mismatch_are_refused(dirs: tuple[Path, Path]) -> None:
    out, data = dirs
    plan = make_plan(out, data, 1, seconds=0.1)
    assert run_sweep(plan, options(), display=SilentDisplay()) == 0
    check_sweep_identity(out, plan.config_hash)
    with pytest.raises(UserError, match="another science config"):
        check_sweep_identity(out, "x" * 64)
    other_regime = "gated" if plan.regime == "ungated" else "ungated"
    # The second regime's command pointed at the first one's dir is named as such, not as a hash.
    with pytest.raises(UserError, match=f"holds the {plan.regime} sweep, this is --regime {other_regime}"):
        check_sweep_identity(out, "x" * 64, other_regime)
    other = make_plan(out, data, 1, seconds=0.1, budget_s=99.0)  # different science, same identity hash
    with pytest.raises(UserError, match="science hash"):
        run_sweep(other, options(), display=SilentDisplay())


def test_status_view(dirs: tuple[Path, Path]) -> None:
    out, data = dirs
    plan = make_plan(out, data, 3, mode=lambda i: "crash" if i == 2 else "ok", seconds=0.1)
    run_sweep(plan, options(), display=SilentDisplay())
    console = Console(record=True, width=200, file=open(os.devnull, "w"))  # noqa: SIM115
    assert show_status(out, console) == 1
    text = console.export_text()
    assert "aide" in text and "exit 1 without result.json" in text and "all trials finished" in text


def test_refused_second_launcher_writes_nothing(dirs: tuple[Path, Path]) -> None:
    out, data = dirs
    plan = make_plan(out, data, 1, seconds=0.1)
    marker = out / "written-before-launch"
    with launcher_lock(out):
        with pytest.raises(UserError, match="another launcher is running"):
            run_sweep(plan, options(), display=SilentDisplay(), before_launch=lambda: marker.write_text("x"))
    assert not marker.exists()
    assert [p.name for p in out.iterdir()] == [".launcher.lock"]  # no spec, status or identity


def test_sigkilled_launcher_leftovers_are_stopped_before_the_rerun(dirs: tuple[Path, Path]) -> None:
    """A launcher killed hard leaves its trials' commands running (own sessions); the re-run must stop
    them (SIGTERM: they checkpoint) before it starts the trials again, never run a trial twice at once."""
    out, data = dirs
    argv = [sys.executable, str(SUPPORT / "drive.py"), str(out), str(data), "2", "checkpoint", "60", "local"]
    proc = subprocess.Popen(argv, stderr=subprocess.DEVNULL)
    plan = make_plan(out, data, 2, seconds=60)
    deadline = time.time() + 30
    while time.time() < deadline and not all(t for t in timelines(plan)):
        time.sleep(0.2)
    proc.kill()
    proc.wait()
    first = [t[0]["pid"] for t in timelines(plan)]
    try:
        for pid in first:
            os.kill(pid, 0)  # the orphans outlived their launcher
        plan = make_plan(out, data, 2, seconds=0.5, budget_s=300.0, mode="checkpoint")
        assert run_sweep(plan, options(), display=SilentDisplay()) == 0
    finally:
        for pid in first:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    for events in timelines(plan):
        assert [e["event"] for e in events] == ["start", "checkpoint", "start", "end"]
    for pid in first:  # gone, or a zombie its new parent has not reaped yet
        stat = Path(f"/proc/{pid}/stat")
        assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"
    assert all(read_status(r.trial.trial_dir, r.trial.trial_id).attempt == 1 for r in plan.commands)


def test_trial_whose_agent_lives_elsewhere_is_not_restarted(dirs: tuple[Path, Path]) -> None:
    """Its launcher is gone, but an agent on another host still holds the journal lock."""
    import fcntl

    out, data = dirs
    plan = make_plan(out, data, 1, seconds=0.1)
    run = plan.commands[0]
    update_status(run.trial.trial_dir, run.trial.trial_id, "submitted", attempt=1, backend="local")
    update_status(run.trial.trial_dir, run.trial.trial_id, "running", pid=4242, host="other-node")
    fd = os.open(run.trial.trial_dir / ".journal.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert run_sweep(plan, options(), display=SilentDisplay()) == 1
        assert read_status(run.trial.trial_dir, run.trial.trial_id).state == "running"
        assert timelines(plan) == [[]]
    finally:
        os.close(fd)
    assert run_sweep(plan, options(), display=SilentDisplay()) == 0


def test_a_recycled_pid_is_not_taken_for_the_trial_session() -> None:
    """status.json's pid may lead another session by now: only a leader started with the run counts."""
    from datetime import UTC, datetime, timedelta

    from mle_world.launch.local.orphans import session_members

    since = datetime.now(UTC)
    leader = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        assert session_members(leader.pid, since) == (leader.pid,)
        assert session_members(leader.pid, since - timedelta(hours=1)) == ()  # began long after that run
        assert session_members(leader.pid, since + timedelta(hours=1)) == ()  # older than that run
    finally:
        leader.kill()
        leader.wait()


def test_full_disk_stops_the_sweep_with_one_line_and_loses_nothing(tmp_path: Path) -> None:
    """The disk fills while a trial is graded: the report and then status.json cannot be written. The
    launcher stops the sweep with one line naming the file (it raised a traceback after waiting for
    every running trial); after space is freed the same command finishes every trial, each once."""
    argv = [sys.executable, "full_disk.py", str(tmp_path / "out"), str(tmp_path / "data")]
    proc = in_private_tmpfs(tmp_path / "out", argv, cwd=SUPPORT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout)
    error = seen["first_error"]
    assert error.startswith(
        "the sweep stopped: ungated/aide/task01/seed34: OSError: [Errno 28] No space left"
    )
    assert "task01_seed34/status.json" in error and "\n" not in error
    assert seen["first_states"][:2] == ["succeeded", "running"]
    assert seen["second_exit"] == 0 and seen["second_states"] == ["succeeded"] * 3
    assert seen["reports"] == [f"task0{i}_report.json" for i in range(3)]
    assert seen["attempts"] == [1, 1, 1]


def test_grade_on_a_finished_sweep_grades_what_has_no_report(dirs: tuple[Path, Path]) -> None:
    """A sweep run without --grade, re-run with it: its finished trials are graded without rerunning
    their agents (they were skipped as done and stayed ungraded); graded ones are not graded again."""
    from mle_world import layout

    out, data = dirs
    plan = make_plan(out, data, 3, mode=lambda i: "crash" if i == 2 else "ok", seconds=0.1)
    assert run_sweep(plan, options(), display=SilentDisplay()) == 1
    graded: list[tuple[str, str]] = []

    def hook(trial, state):  # type: ignore[no-untyped-def]
        graded.append((trial.trial_id, state))
        layout.report_beside(trial.trial_dir).write_text("{}")

    assert run_sweep(plan, options(grade=True), post_trial=hook, display=SilentDisplay()) == 1
    assert graded == [
        (plan.commands[0].trial.trial_id, "succeeded"),
        (plan.commands[1].trial.trial_id, "succeeded"),
    ]
    assert [len(t) for t in timelines(plan)] == [2, 2, 2]  # start + end each: no agent ran again
    assert run_sweep(plan, options(grade=True), post_trial=hook, display=SilentDisplay()) == 1
    assert len(graded) == 2
