"""`status` of a large sweep: a bounded view (counts, causes grouped, longest running, ETA, next command)
and `status --json` for scripts, on real files through the real CLI process.

Reads nothing of the repository; writes a synthetic sweep (tests/support/synthetic.py) under tmp_path.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from synthetic import add_statuses, make_sweep

from mle_world import layout
from mle_world.cli.status_view import render_summary
from mle_world.launch.sweep_state import SweepStatus
from mle_world.launch.sweep_summary import SweepSummary, estimate_eta, group_failures, summarise
from mle_world.plan.estimate import makespan
from mle_world.records import TrialStatus

REPO = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 6, 1, 12, tzinfo=UTC)


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPO / "run_paper.py"), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        check=False,
    )


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    (out,) = make_sweep(tmp_path_factory.mktemp("status"), 1_200, events=False, regimes=("gated",))
    return out, add_statuses(out, running=12)


def test_status_of_a_large_sweep_is_bounded_and_says_what_to_run(sweep: tuple[Path, dict[str, int]]) -> None:
    out, counts = sweep
    proc = run("status", str(out))
    assert proc.returncode == 1, proc.stderr  # some trials failed
    text = proc.stdout
    lines = text.splitlines()
    assert len(lines) < 90, text  # 1,200 trials, 72 failed, 12 running: no line per trial
    assert f"│ total         │ {counts['pending']:>7} │" in text
    assert f"failed: {counts['failed']} (infra 48, agent 24) by cause" in text
    # Causes differing only in job ids or steps are one group, with its count and examples.
    assert "slurm job 4000000_60 CANCELLED without a result" in text and "NODE_FAIL" in text
    assert text.count("CANCELLED without a result") == 1
    assert "running: the 5 longest of 12" in text
    assert "launcher: none running" in text
    # A hostile cause is shown inert: its escape sequence as text, never the byte.
    assert "\x1b" not in text and "\\x1b]52;c;aGk=\\x07RuntimeError" in text
    assert "ETA: ~" in text and "at the current parallelism (12)" in text
    assert "trial-hours" in text and "GPU-hours" in text
    flags = f"--regime gated --backend slurm --grade --output-dir {out}"
    # Pending trials of a sweep no launcher watches (`--no-wait`'s held-back ones) wait for that command.
    what = f"48 infra failure(s) and {counts['pending']} pending trial(s) no launcher will start"
    assert f"next: rerun {what}: python run_paper.py {flags} --retry-failed\n" in text
    assert f"python run_paper.py {flags} --retry-failed all" in text


def test_status_json_is_the_summary_with_every_failed_trial(sweep: tuple[Path, dict[str, int]]) -> None:
    out, counts = sweep
    proc = run("status", str(out), "--json")
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.isascii() and "\x1b" not in proc.stdout  # escapes, inert on a terminal too
    summary = SweepSummary.model_validate_json(proc.stdout)
    assert summary.counts == {s: counts.get(s, 0) for s in summary.counts}
    assert len(summary.failed_trials) == counts["failed"]
    assert sum(g.trials for g in summary.failures) == counts["failed"]
    assert any("\x1b]52" in (t.cause or "") for t in summary.failed_trials)  # the data, unaltered
    assert summary.running == 12 and len(summary.running_longest) == 5
    assert summary.eta_s is not None and summary.eta_s > 0
    assert not summary.finished and summary.next_commands


def test_costs_add_the_spend_so_far_per_role(sweep: tuple[Path, dict[str, int]]) -> None:
    out, _ = sweep
    text = run("status", str(out), "--costs").stdout
    # Every synthetic trial's CSV: each of the four roles $0.25 a trial, over 1,200 trials.
    assert "spend so far: the cost CSVs of 1200 finished trial(s)" in text
    assert "│ coder     │   1200 │     1,200,000 │           120,000 │     120.0 │   $300.00 │" in text
    assert "$1,200.00" in text
    summary = SweepSummary.model_validate_json(run("status", str(out), "--costs", "--json").stdout)
    assert summary.spend is not None and sum(r.cost_usd or 0 for r in summary.spend) == pytest.approx(1200.0)
    assert SweepSummary.model_validate_json(run("status", str(out), "--json").stdout).spend is None


def test_watch_and_json_exclude_each_other(sweep: tuple[Path, dict[str, int]]) -> None:
    proc = run("status", str(sweep[0]), "--json", "--watch")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "exclude each other" in proc.stderr


def test_one_trial_with_its_logs_last_lines(sweep: tuple[Path, dict[str, int]]) -> None:
    out, _ = sweep
    hostile = next(
        TrialStatus.model_validate_json(path.read_text())
        for path in sorted(out.glob("runs/*/*/status.json"))
        if "\\u001b]52" in path.read_text()  # JSON writes ESC so
    )
    proc = run("status", str(out), "--trial", hostile.trial_id, "--lines", "2")
    assert proc.returncode == 1, proc.stderr  # it failed
    text = proc.stdout
    assert "state failed (agent), attempt 1" in text and "agent: not running" in text
    assert "\x1b" not in text and text.count("\\x1b]52;c;aGk=\\x07RuntimeError") == 2  # cause and log line
    assert "step 39: executing node n39" in text and "step 38" not in text  # the last 2 lines
    # Without the regime, or as a directory, the same trial.
    key = layout.parse_trial_id(hostile.trial_id)
    assert key is not None
    short = run("status", str(out), "--trial", hostile.trial_id.split("/", 1)[1], "--lines", "2")
    folder = layout.trial_dir(out, key.configuration, key.task, key.seed)
    assert short.stdout == text == run("status", str(out), "--trial", str(folder), "--lines", "2").stdout
    bad = run("status", str(out), "--trial", "aide/nope/seed1")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--trial aide/nope/seed1" in bad.stderr
    # The other regime's id names the same path here: it was shown as if it were that trial.
    other = ("ungated/" if hostile.trial_id.startswith("gated/") else "gated/") + hostile.trial_id.split(
        "/", 1
    )[1]
    bad = run("status", str(out), "--trial", other)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
    assert f"--trial {other}: " in bad.stderr and f"has {hostile.trial_id} there" in bad.stderr, bad.stderr
    # A trial dir of another output dir is not one of this sweep's.
    elsewhere = out.parent / "elsewhere" / "runs" / "aide" / "t_seed1"
    elsewhere.mkdir(parents=True)
    shutil.copy(folder / "status.json", elsewhere / "status.json")
    bad = run("status", str(out), "--trial", str(elsewhere))
    assert bad.returncode == 2 and "not a trial dir of" in bad.stderr, bad.stderr


def status(trial: str, state: str, **fields: object) -> TrialStatus:
    return TrialStatus.model_validate({"trial_id": f"gated/{trial}/seed34", "state": state, **fields})


def test_the_eta_simulates_what_is_left_from_measured_times() -> None:
    done = dict(started_at=NOW - timedelta(hours=2), ended_at=NOW - timedelta(hours=1))
    trials = (
        status("aide/a", "succeeded", wall_used_s=100.0, **done),
        status("aide/b", "failed", wall_used_s=300.0, **done),
        status("aide/c", "running", started_at=NOW - timedelta(seconds=40)),  # predicted 200 (mean)
        status("wm-point/a", "running", started_at=NOW - timedelta(seconds=10), wall_used_s=20.0),
        status("aide/a", "submitted"),  # measured (its earlier attempt): 100
        status("wm-point/b", "pending"),  # no wm-point measured: the mean of all, 200
    )
    # Two slots (two trials run), free at 160 (200 - 40) and 170 (200 - 30 of two runs): the 100 s
    # trial starts at 160, the 200 s one at 170 and ends last.
    assert estimate_eta(trials, NOW) == (370.0, 2)
    assert makespan([100.0, 200.0], 2, busy_s=[160.0, 170.0]) == 370.0
    assert estimate_eta(trials[2:], NOW) == (None, 2)  # nothing finished yet
    assert estimate_eta(trials[:2], NOW) == (0.0, 1)  # nothing left
    assert estimate_eta((*trials[:2], trials[4]), NOW) == (None, 1)  # nothing runs: no parallelism seen


def test_causes_group_by_their_text_without_numbers() -> None:
    failed = [
        status(
            f"aide/t{i}",
            "failed",
            failure_class="infra",
            cause=f"slurm job 12_{i} CANCELLED without a result",
        )
        for i in range(5)
    ] + [status("aide/x", "failed", failure_class="agent", cause="agent failed: error: boom")]
    groups = group_failures(failed)
    assert [(g.trials, g.failure_class) for g in groups] == [(5, "infra"), (1, "agent")]
    assert groups[0].cause == "slurm job 12_0 CANCELLED without a result"
    assert groups[0].examples == ("gated/aide/t0/seed34", "gated/aide/t1/seed34", "gated/aide/t2/seed34")


def test_next_command_of_a_finished_sweep_is_the_audit(tmp_path: Path) -> None:
    (tmp_path / "launch.json").write_text(
        json.dumps({"argv": ["--regime", "gated", "--output-dir", "runs/x"]})
    )
    done = status("aide/a", "succeeded", wall_used_s=5.0, started_at=NOW, ended_at=NOW)
    summary = summarise(tmp_path, SweepStatus((done,), (), launcher_alive=False), NOW)
    assert summary.finished and summary.next_commands == (f"audit it: python run_paper.py audit {tmp_path}",)
    failed = status("aide/b", "failed", failure_class="infra", cause="killed by SIGKILL")
    summary = summarise(tmp_path, SweepStatus((done, failed), (), launcher_alive=False), NOW)
    # The argv's relative --output-dir is this sweep only from where it was launched: said so.
    assert summary.next_commands[0] == (
        "rerun 1 infra failure(s) (from the directory the sweep was launched in: --output-dir runs/x is "
        "relative): python run_paper.py --regime gated --output-dir runs/x --retry-failed"
    )


def test_a_sweep_stopped_with_pending_trials_says_to_resume_it(tmp_path: Path) -> None:
    """A local sweep stopped by Ctrl-C leaves its unstarted trials pending and no launcher: `status` gave
    no next command and `--watch` waited for them forever."""
    (tmp_path / "launch.json").write_text(
        json.dumps({"argv": ["--regime", "gated", "--output-dir", str(tmp_path)]})
    )
    done = status("aide/a", "succeeded", wall_used_s=5.0, started_at=NOW, ended_at=NOW)
    waiting = [
        status(f"aide/w{i}", "pending", backend="local", cause="interrupted (SIGINT)") for i in range(2)
    ]
    summary = summarise(tmp_path, SweepStatus((done, *waiting), (), launcher_alive=False), NOW)
    assert summary.finished and summary.stuck == 2, summary
    assert summary.next_commands[0] == (
        f"rerun 2 pending trial(s) no launcher will start: python run_paper.py --regime gated --output-dir "
        f"{tmp_path} --retry-failed"
    )
    shown = "\n".join(str(r) for r in render_summary(summary))
    assert "ETA: none: every unfinished trial waits for the command below" in shown, shown
    # While a launcher runs, pending trials are its queue: nothing to say yet.
    summary = summarise(tmp_path, SweepStatus((done, *waiting), (), launcher_alive=True), NOW)
    assert not summary.finished and summary.stuck == 0 and not summary.next_commands


def test_an_unreadable_status_is_no_finished_sweep_in_json_either(sweep: tuple[Path, dict[str, int]]) -> None:
    """`status --json` (and `--watch`) left the trial out: "finished", "audit it", exit 0."""
    out, _ = sweep
    path = sorted(out.glob("runs/*/*/status.json"))[0]
    path.write_text("{not json")
    proc = run("status", str(out), "--json")
    assert proc.returncode == 2, proc.stderr
    summary = SweepSummary.model_validate_json(proc.stdout)
    assert summary.unreadable and str(path) in summary.unreadable[0]
    assert not summary.finished and not any(c.startswith("audit it") for c in summary.next_commands)


def test_a_launch_that_ended_with_failures_says_what_to_run(sweep: tuple[Path, dict[str, int]]) -> None:
    """What `execute_plan` prints after `run_sweep` returned 1: where the causes are, and the command."""
    from rich.console import Console

    from mle_world.cli.sweep import _say_next

    out, _ = sweep
    err = Console(record=True, width=80, file=open(os.devnull, "w"))  # noqa: SIM115
    _say_next(out, err)
    lines = err.export_text().splitlines()
    assert lines[0] == f"[launch] next: failures by cause: python run_paper.py status {out}"
    assert lines[1].startswith("[launch] next: rerun 48 infra failure(s) and ")
    assert "pending trial(s) no launcher will start: python run_paper.py --regime gated" in lines[1]
    assert lines[1].endswith(" --retry-failed")  # one line however long: it is copied whole


def test_times_and_costs_that_are_not_finite_are_no_numbers() -> None:
    """`"wall_used_s": Infinity` in a status.json read as inf trial-hours (and `--json` wrote Infinity,
    which strict JSON parsers refuse); a cost CSV's inf or nan summed to $nan."""
    from pydantic import ValidationError

    from mle_world.costs.summary import summarise_cost_rows

    for value in ("Infinity", "NaN", "-5"):
        with pytest.raises(ValidationError):
            TrialStatus.model_validate_json(f'{{"trial_id": "gated/aide/t/seed1", "wall_used_s": {value}}}')
    rows = [
        {"regime": "gated", "configuration": "aide", "role": "coder", "trial_id": f"gated/aide/t/seed{i}",
         "cost_usd": cost, "gpu_hours": "1"}
        for i, cost in enumerate(("1.5", "inf", "nan"))
    ]  # fmt: skip
    (row,) = summarise_cost_rows(rows)
    assert row.cost_usd is None, row  # two trials' costs unknown: no total


def test_a_corrupt_launch_json_is_said_not_silently_dropped(tmp_path: Path) -> None:
    """`status` said "no trials launched yet" (exit 0) of a dir whose launch.json is corrupt, and for a
    finished sweep the next command just vanished."""
    (tmp_path / "launch.json").write_text("{not json")
    shown = run("status", str(tmp_path))
    assert shown.returncode == 0 and "no trials launched yet" in shown.stdout
    assert "launch.json: not JSON (corrupt?)" in shown.stdout, shown.stdout
    done = status("aide/a", "succeeded", wall_used_s=5.0, started_at=NOW, ended_at=NOW)
    summary = summarise(tmp_path, SweepStatus((done,), (), launcher_alive=False), NOW)
    assert summary.launch_problem == f"{tmp_path / 'launch.json'}: not JSON (corrupt?)"
    shown_lines = [str(r) for r in render_summary(summary)]
    assert f"warning: {summary.launch_problem}: no next command" in shown_lines, shown_lines


def test_an_unreadable_cost_csv_is_named_not_silently_left_out(tmp_path: Path) -> None:
    """`--costs` summed the readable CSVs and said nothing of the others."""
    costs = tmp_path / "costs"
    costs.mkdir()
    (costs / "aide.t.seed1.csv").write_text(
        "trial_id,regime,configuration,role,cost_usd\ngated/aide/t/seed1,gated,aide,coder,1.5\n"
    )
    (costs / "aide.t.seed2.csv").write_bytes(b"\xff\xfe garbage")
    done = status("aide/a", "succeeded", wall_used_s=5.0, started_at=NOW, ended_at=NOW)
    summary = summarise(tmp_path, SweepStatus((done,), (), launcher_alive=False), NOW, costs=True)
    assert summary.spend is not None and [r.cost_usd for r in summary.spend] == [1.5]
    assert summary.spend_unreadable == (str(costs / "aide.t.seed2.csv"),)
    shown = [str(r) for r in render_summary(summary)]
    assert f"left out of the spend: unreadable cost CSV {costs / 'aide.t.seed2.csv'}" in shown, shown


def test_a_fifo_where_a_status_belongs_is_refused_not_waited_on(tmp_path: Path) -> None:
    """`status` and `estimate --measured` opened it and blocked until a writer came (forever)."""
    trial_id = "gated/aide/iris-species/seed34"
    trial_dir = tmp_path / "runs" / "aide" / "iris-species_seed34"
    trial_dir.mkdir(parents=True)
    os.mkfifo(trial_dir / "status.json")
    (tmp_path / "launch.json").write_text(json.dumps({"argv": ["--regime", "gated"]}))
    proc = run("status", str(tmp_path))
    assert proc.returncode == 2 and "status.json: corrupt trial status: not a regular file" in proc.stderr
    from mle_world.plan.estimate import measured_times
    from mle_world.records import LaunchedTrial, LaunchRecord
    from mle_world.storage import write_model

    write_model(tmp_path / "launch.json", LaunchRecord(
        argv=("x",), harness_version="0", git_sha=None, created_at=NOW, regime="gated", config_path="c",
        config_hash="h", cluster_path=None, backend="local", runtime="process", dry_run=False, sandbox=False,
        data_dir="/d", endpoints=(), trials=(LaunchedTrial(trial_id=trial_id, science_hash="h",
                                                          trial_dir=str(trial_dir), command="x"),)))  # fmt: skip
    assert measured_times(tmp_path) == {}
    # launch.json as a FIFO: the next command's reader said "unreadable" without waiting on it.
    (tmp_path / "launch.json").unlink()
    os.mkfifo(tmp_path / "launch.json")
    from mle_world.launch.next_command import launch_problem

    assert launch_problem(tmp_path) == f"{tmp_path / 'launch.json'}: unreadable (not a regular file)"
