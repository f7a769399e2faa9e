"""The sweep simulator's arithmetic: list-scheduled makespan, GPU-hours, cost, savings, measured times.

Reads nothing; writes launch.json and status.json files of a small finished sweep under tmp_path.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from mle_world.errors import UserError
from mle_world.plan.estimate import (
    estimate,
    makespan,
    measured_savings,
    measured_times,
    parallelism_levels,
    planned_keys,
    planned_times,
    trial_key,
    with_savings,
)
from mle_world.records import LaunchedTrial, LaunchRecord, TrialStatus
from mle_world.storage import write_model


def test_equal_trials_run_in_waves():
    assert makespan([1.0] * 10, 3) == 4.0  # waves of 3, 3, 3, 1
    assert makespan([1.0] * 10, 3, overhead_s=0.5) == 6.0
    assert makespan([1.0] * 9, 3) == 3.0
    assert makespan([2.0, 5.0], 8) == 5.0  # more slots than trials: the longest trial
    assert makespan([], 4) == 0.0
    # The start-up wait is paid once, before the first wave, not per trial.
    assert makespan([1.0] * 10, 3, overhead_s=0.5, startup_s=2.0) == 8.0
    assert makespan([], 4, startup_s=2.0) == 0.0


def test_trials_start_in_index_order_on_the_first_free_slot():
    # A long trial first overlaps the short ones; the same trial last starts after them.
    assert makespan([4.0, 1.0, 1.0, 1.0, 1.0], 2) == 4.0
    assert makespan([1.0, 1.0, 1.0, 1.0, 4.0], 2) == 6.0
    assert makespan([3.0, 2.0, 2.0], 2) == 4.0  # third trial takes the slot freed at t=2
    with pytest.raises(ValueError):
        makespan([1.0], 0)


def test_gpu_hours_cost_and_utilisation():
    result = estimate([3600.0, 3600.0, 1800.0], 2, gpus_per_trial=2, usd_per_gpu_hour=2.5)
    assert result.makespan_s == 5400.0
    assert result.gpu_hours == pytest.approx(5.0)  # 2.5 trial-hours × 2 GPUs
    assert result.cost_usd == pytest.approx(12.5)
    assert result.utilisation == pytest.approx(9000.0 / (2 * 5400.0))
    assert estimate([60.0], 1, gpus_per_trial=1, usd_per_gpu_hour=None).cost_usd is None
    # More parallelism shortens the makespan, never the GPU-hours.
    wide = estimate([3600.0] * 8, 8, gpus_per_trial=1, usd_per_gpu_hour=1.0)
    narrow = estimate([3600.0] * 8, 2, gpus_per_trial=1, usd_per_gpu_hour=1.0)
    assert (wide.makespan_s, narrow.makespan_s) == (3600.0, 4 * 3600.0)
    assert wide.gpu_hours == narrow.gpu_hours == 8.0
    # Waiting in the queue lengthens the makespan, not the GPU-hours, and is no idle allocation.
    queued = estimate([3600.0] * 8, 8, gpus_per_trial=1, usd_per_gpu_hour=1.0, startup_s=1800.0)
    assert (queued.makespan_s, queued.gpu_hours, queued.utilisation) == (5400.0, 8.0, 1.0)


def test_savings_shorten_every_trial():
    assert with_savings([100.0, 40.0], 0.25) == [75.0, 30.0]
    assert with_savings([100.0], 0.0) == [100.0]
    for bad in (-0.1, 1.0):
        with pytest.raises(ValueError):
            with_savings([1.0], bad)
    gated = {"wm/t1/seed0": 60.0, "wm/t2/seed0": 40.0}
    ungated = {"wm/t1/seed0": 100.0, "wm/t2/seed0": 100.0, "wm/t3/seed0": 50.0}
    assert measured_savings(gated, ungated) == pytest.approx(0.5)  # t3 has no gated twin: ignored
    assert measured_savings({"a/b/seed0": 120.0}, {"a/b/seed0": 100.0}) == 0.0  # slower: no saving
    with pytest.raises(UserError, match="no finished trial in common"):
        measured_savings(gated, {"other/t/seed0": 1.0})


def test_planned_times_fall_back_from_trial_to_task_to_configuration_to_all():
    measured = {"aide/t1/seed0": 10.0, "aide/t1/seed1": 20.0, "aide/t2/seed0": 40.0, "wm/t1/seed0": 100.0}
    keys = ["aide/t1/seed0", "aide/t1/seed9", "aide/t7/seed0", "new/t1/seed0"]
    assert planned_times(keys, 999.0, measured) == [10.0, 15.0, pytest.approx(70 / 3), 42.5]
    assert planned_times(keys, 999.0, None) == [999.0] * 4


def test_parallelism_levels_around_the_configured_one():
    assert parallelism_levels(32, 357) == [8, 16, 32, 64]
    assert parallelism_levels(2, 1) == [1, 2]
    assert parallelism_levels(1, 10) == [1, 2]


def test_measured_times_read_a_finished_sweep(tmp_path: Path):
    start = datetime(2026, 1, 1, tzinfo=UTC)
    trials = []
    # (state, last run's seconds, wall_used_s): a final trial's wall_used_s holds all its runs, the
    # last one included (t2 ran 5 s before a requeue, then 10 s); a running one only the earlier runs.
    states = {"t1": ("succeeded", 30.0, 30.0), "t2": ("failed", 10.0, 15.0), "t3": ("running", 50.0, 0.0)}
    for task, (state, seconds, wall_used) in states.items():
        trial_dir = tmp_path / "runs" / "aide" / f"{task}_seed0"
        trial_id = f"gated/aide/{task}/seed0"
        trials.append(
            LaunchedTrial(trial_id=trial_id, science_hash="h", trial_dir=str(trial_dir), command="x")
        )
        end = start + timedelta(seconds=seconds) if state != "running" else None
        write_model(trial_dir / "status.json", TrialStatus(
            trial_id=trial_id, state=state, started_at=start, ended_at=end, wall_used_s=wall_used))  # type: ignore[arg-type]  # fmt: skip
    record = LaunchRecord(
        argv=("x",), harness_version="0", git_sha=None, created_at=start, regime="gated", config_path="c",
        config_hash="h", cluster_path=None, backend="slurm", runtime="process", dry_run=False, sandbox=False,
        data_dir="/d", endpoints=(), trials=tuple(trials),
    )  # fmt: skip
    write_model(tmp_path / "launch.json", record)
    assert measured_times(tmp_path) == {"aide/t1/seed0": 30.0, "aide/t2/seed0": 15.0}
    with pytest.raises(UserError, match="launch.json"):
        measured_times(tmp_path / "nowhere")


def finished_sweep(out: Path, regime: str, seconds: dict[int, float]) -> Path:
    """launch.json + status.json of a finished sweep of aide/iris-species with the given seed → seconds."""
    start = datetime(2026, 1, 1, tzinfo=UTC)
    trials = []
    for seed, took in seconds.items():
        trial_id = f"{regime}/aide/iris-species/seed{seed}"
        trial_dir = out / "runs" / "aide" / f"iris-species_seed{seed}"
        trials.append(
            LaunchedTrial(trial_id=trial_id, science_hash="h", trial_dir=str(trial_dir), command="x")
        )
        write_model(trial_dir / "status.json", TrialStatus(
            trial_id=trial_id, state="succeeded", started_at=start, ended_at=start + timedelta(seconds=took),
            wall_used_s=took))  # fmt: skip
    write_model(out / "launch.json", LaunchRecord(
        argv=("x",), harness_version="0", git_sha=None, created_at=start, regime=regime, config_path="c",  # type: ignore[arg-type]
        config_hash="h", cluster_path=None, backend="slurm", runtime="process", dry_run=False, sandbox=False,
        data_dir="/d", endpoints=(), trials=tuple(trials)))  # fmt: skip
    return out


SELECT = ["--configs", "aide", "--tasks", "iris-species", "--seeds", "34,35,36", "--usd-per-gpu-hour", "2"]


def test_cli_estimate_from_time_limits(capsys: pytest.CaptureFixture[str]) -> None:
    from mle_world.cli import main

    assert main(["estimate", "--regime", "ungated", *SELECT, "--parallelism", "1,2,3"]) == 0
    out = capsys.readouterr().out
    assert "3 trials" in out and "12.5 h each" in out  # 12 h budget + 30 min grading margin
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:6]] for line in out.splitlines()
            if line.startswith("│")}  # fmt: skip
    assert rows["1"] == ["37.5 h", "37.5", "$75.00", "100%"]
    assert rows["2"] == ["25.0 h", "37.5", "$75.00", "75%"]
    assert rows["3"] == ["12.5 h", "37.5", "$75.00", "100%"]

    assert (
        main(["estimate", "--regime", "ungated", *SELECT, "--parallelism", "3", "--startup-s", "1800"]) == 0
    )
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("│"))
    assert [c.strip() for c in row.split("│")[1:6]] == ["3", "13.0 h", "37.5", "$75.00", "100%"]


def test_cli_estimate_from_measured_times_with_measured_gate_savings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mle_world.cli import main

    ungated = finished_sweep(tmp_path / "ungated", "ungated", {34: 7200.0, 35: 7200.0, 36: 7200.0})
    gated = finished_sweep(tmp_path / "gated", "gated", {34: 3600.0, 35: 7200.0, 36: 3600.0})
    argv = ["estimate", "--regime", "gated", *SELECT, "--parallelism", "2", "--measured", str(ungated),
            "--savings-from", str(gated), str(ungated)]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "gate savings: 33.3%" in out and "3 finished trials" in out
    row = next(line for line in out.splitlines() if line.startswith("│"))
    cells = [c.strip() for c in row.split("│")[1:-1]]
    # 3 × 2 h on 2 slots: 4 h, 6 GPU-hours; a third faster: 3 × 80 min → 160 min, 4 GPU-hours.
    assert cells == ["2", "4.0 h", "6.0", "$12.00", "75%", "2.7 h", "4.0", "$8.00"]


def test_cli_estimate_bad_input_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mle_world.cli import main

    assert main(["estimate", "--regime", "gated", "--savings", "1.5"]) == 2
    assert main(["estimate", "--regime", "gated", *SELECT, "--measured", str(tmp_path)]) == 2
    assert main(["estimate", "--regime", "gated", *SELECT, "--startup-s", "-5"]) == 2
    assert main(["estimate", "--regime", "gated", *SELECT, "--overhead-s", "nan"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 4 and "--savings" in err[0] and "launch.json" in err[1]
    assert "--startup-s" in err[2] and "--overhead-s" in err[3]
    assert "Traceback" not in "".join(err)


def test_cli_estimate_refuses_swapped_sweeps_and_a_selection_the_sweep_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Swapped --savings-from dirs measured the gate as costing time and printed 0.0 % savings; --seeds
    outside the config's and empty --tasks/--configs/--seeds estimated what no sweep would run."""
    from mle_world.cli import main

    ungated = finished_sweep(tmp_path / "ungated", "ungated", {1: 7200.0})
    gated = finished_sweep(tmp_path / "gated", "gated", {1: 3600.0})
    base = ["estimate", "--regime", "gated", "--usd-per-gpu-hour", "2"]
    assert main([*base, "--savings-from", str(ungated), str(gated)]) == 2
    assert main([*base, "--savings-from", str(gated), str(gated)]) == 2
    for bad in (["--seeds", "99"], ["--seeds", ","], ["--tasks", ","], ["--configs", ","]):
        assert main([*base, *bad]) == 2, bad
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 6 and "Traceback" not in "".join(err), err
    assert f"{ungated}: a ungated sweep (launch.json), where gated goes" in err[0], err[0]
    assert f"{gated}: a gated sweep (launch.json), where ungated goes" in err[1], err[1]
    assert "--seeds: 99 not among the config's seeds" in err[2] and "--seeds: no seed given" in err[3]
    assert "--tasks: nothing given" in err[4] and "--configs: nothing given" in err[5]


def test_busy_slots_start_later():
    """`status`'s ETA: slots held by running trials free up after what is left of them."""
    assert makespan([10.0], 2, busy_s=[5.0, 30.0]) == 30.0
    assert makespan([10.0, 10.0], 2, busy_s=[5.0]) == 15.0  # one free slot, one free after 5 s
    assert makespan([], 2, busy_s=[5.0, 7.0]) == 7.0
    with pytest.raises(ValueError):
        makespan([1.0], 1, busy_s=[1.0, 1.0])


def test_planned_keys_are_the_expanded_trials_keys_in_their_order() -> None:
    """`estimate` built every trial (spec, paths, science hash: 0.7 s of its 1 s at 3,570 trials) only
    to take its key; `planned_keys` gives the same keys in the same order and refuses what expand
    refuses."""
    import sys

    from mle_world.plan.config import load_paper_config
    from mle_world.plan.render import RuntimeSpec, view_paths
    from mle_world.plan.sweep import Selection, expand
    from mle_world.tasks.registry import load_registry

    registry = load_registry()
    # From the checkout, not the working directory (another test in the same xdist worker may chdir).
    paper = Path(__file__).resolve().parents[2] / "configs" / "paper.yaml"
    config = load_paper_config(paper, registry.__contains__)
    runtime = RuntimeSpec("process", python=sys.executable)
    for selection in (Selection(), Selection(configurations=("wm-point", "aide"), seeds=(36, 34))):
        trials = expand(
            config, "gated", selection, output_dir=Path("/o"), data_dir=Path("/d"),
            known_task=registry.__contains__, view=lambda d, p: view_paths(runtime, d, p),
        )  # fmt: skip
        keys = planned_keys(config, "gated", selection, registry.__contains__)
        assert keys == [trial_key(t.trial_id) for t in trials] and len(keys) == len(trials) > 0
    for regime, selection, message in (
        ("nope", Selection(), "--regime: 'nope' is not in"),
        ("gated", Selection(configurations=("wm-x",)), "--configs: unknown configuration 'wm-x'"),
        ("gated", Selection(tasks=("no-such-task",)), "--tasks: unknown task id 'no-such-task'"),
    ):
        with pytest.raises(UserError, match=message):
            planned_keys(config, regime, selection, registry.__contains__)  # type: ignore[arg-type]


def test_cli_estimate_says_how_slurm_splits_a_large_sweep(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mle_world.cli import main

    cluster = tmp_path / "cluster.yaml"
    cluster.write_text("slurm:\n  max_array_tasks: 2\n  query_interval_s: 5\n")
    args = ["estimate", "--regime", "gated", *SELECT, "--cluster-config", str(cluster)]
    assert main(args) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert (
        "On Slurm: 2 arrays of at most 2 trials (slurm.max_array_tasks) sharing one array_parallelism" in out
    )
    # the launcher asks Slurm at its first 2 s status read 5 s after the last question: every 6 s
    assert "simulated 3 s late (half the launcher's 6 s query period" in out
    assert main([*args, "--handoff-s", "0"]) == 0
    calibrated = " ".join(capsys.readouterr().out.split())
    assert "simulated 0 s late (--handoff-s)" in calibrated
    assert main(["estimate", "--regime", "gated", *SELECT]) == 0
    assert "On Slurm" not in capsys.readouterr().out  # 3 trials: one array


def test_a_slot_goes_on_to_a_later_array_one_hand_on_late():
    """Arrays of 2 on 2 slots: the second array's trials start on slots the first array's trials
    freed, each at the launcher's next poll (`handoff_s`); within an array Slurm starts the next task
    itself. Slots the live arrays leave free at the start go to later arrays at once."""
    assert makespan([1.0, 3.0, 1.0, 1.0], 2, array_size=2, handoff_s=0.5) == 3.5
    # slot A: 1 → (hand-on) 1.5 → 2.5 → (same array) 3.5; slot B: 3 → no more trials
    assert makespan([1.0, 3.0, 1.0, 1.0], 2, array_size=2, handoff_s=0.0) == makespan([1.0, 3.0, 1.0, 1.0], 2)
    assert makespan([1.0] * 4, 4, array_size=2, handoff_s=9.0) == 1.0  # room for both arrays at once
    assert makespan([1.0] * 4, 2, array_size=2, handoff_s=0.5) == 2.5
    est = estimate([1.0] * 4, 2, gpus_per_trial=1, usd_per_gpu_hour=None, array_size=2, handoff_s=0.5)
    assert est.makespan_s == 2.5 and est.gpu_hours == 4 / 3600


def test_the_launchers_query_period_follows_its_status_reads():
    """It asks Slurm at the first status read (every 2 s) at least query_interval_s after the last."""
    from mle_world.launch.slurm.queries import query_period_s

    assert [query_period_s(q) for q in (0.0, 1.0, 2.0, 5.0, 30.0)] == [2.0, 2.0, 2.0, 6.0, 30.0]
