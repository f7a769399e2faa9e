"""The run_paper.py dry run and its one-line errors: the dry runs through a real subprocess, the refusals
through `mle_world.cli.main` in process (tests/support/clikit.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from clikit import Cli

REPO = Path(__file__).resolve().parents[2]


def run(*args: str, cwd: Path = REPO, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPO / "run_paper.py"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


SEED_OPTIONS = [
    "--grade",
    "--coder-url",
    "http://c:8000/v1",
    "--feedback-url",
    "http://f:8002/v1",
    "--world-url",
    "http://w:8001/v1",
    "--enroot-image",
    "/img/aide.x86_64.sqsh",
    "--data-dir",
    "/data",
    "--n-workers",
    "1",
    "--gpu-device",
    "0",
]


@pytest.mark.parametrize("regime", ["ungated", "gated"])
def test_seed_dry_run_lists_357_trials_and_records_them(tmp_path: Path, regime: str) -> None:
    out = tmp_path / f"paper-{regime}"
    proc = run(*SEED_OPTIONS, "--regime", regime, "--output-dir", str(out), "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("enroot start") == 357
    record = json.loads((out / "launch.json").read_text())
    assert len(record["trials"]) == 357
    assert len({t["trial_id"] for t in record["trials"]}) == 357
    assert all(
        t["command"].startswith("trap '' TERM USR2; ENROOT_MOUNT_HOME=no enroot start")
        for t in record["trials"]
    )
    assert record["dry_run"] is True and record["regime"] == regime
    assert len(record["config_hash"]) == 64
    assert record["git_sha"] is None or len(record["git_sha"]) == 40
    assert [e["url"] for e in record["endpoints"]] == [
        "http://c:8000/v1",
        "http://f:8002/v1",
        "http://w:8001/v1",
    ]
    assert (out / "agent-config.yaml").exists()
    assert sorted(p.name for p in out.iterdir()) == ["agent-config.yaml", "launch.json"]  # nothing else


def test_dry_run_beside_a_real_run_leaves_its_records_alone(tmp_path: Path) -> None:
    """A dry run (here of another regime's science) on the output dir of a real sweep must not replace
    the record of what that sweep ran: launch.json nor the resolved config agent-config.yaml."""
    out = tmp_path / "paper"
    assert run(*SEED_OPTIONS, "--regime", "gated", "--output-dir", str(out), "--dry-run").returncode == 0
    record = json.loads((out / "launch.json").read_text())
    (out / "launch.json").write_text(json.dumps({**record, "dry_run": False}))  # as a real run leaves it
    real = {name: (out / name).read_bytes() for name in ("launch.json", "agent-config.yaml")}
    proc = run(*SEED_OPTIONS, "--regime", "ungated", "--output-dir", str(out), "--dry-run", "--summary")
    assert proc.returncode == 0, proc.stderr
    assert {name: (out / name).read_bytes() for name in real} == real
    assert "regime: ungated" in (out / "agent-config.dry-run.yaml").read_text()
    assert json.loads((out / "launch.dry-run.json").read_text())["regime"] == "ungated"
    assert f"wrote {out / 'launch.dry-run.json'} and {out / 'agent-config.dry-run.yaml'}" in proc.stdout


@pytest.mark.parametrize("name", ["50%util", "a\\b"])
def test_slurm_refuses_an_output_dir_its_log_patterns_would_rewrite(
    cli: Cli, tmp_path: Path, name: str
) -> None:
    """sbatch --output expands '%u', '%x', … in the whole path (a backslash turns off the '%j' that
    submitit's log names need): one line, exit 2, before anything is written."""
    out = tmp_path / name
    proc = cli.run(
        *SEED_OPTIONS,
        "--regime",
        "gated",
        "--output-dir",
        str(out),
        "--dry-run",
        "--backend",
        "slurm",
        cwd=REPO,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "sbatch --output reads" in proc.stderr and str(out) in proc.stderr
    assert not out.exists()


def test_summary_table(tmp_path: Path) -> None:
    proc = run(*SEED_OPTIONS, "--regime", "gated", "--output-dir", str(tmp_path), "--dry-run", "--summary")
    assert proc.returncode == 0
    assert "wm-pairwise4" in proc.stdout and "357 trials" in proc.stdout


def test_one_trial_mode_honours_mle_seed(tmp_path: Path) -> None:
    env = {"MLE_SEED": "7", "CUDA_DEVICE": "3", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    proc = run(
        "-c",
        "spooky-author-identification",
        "-i",
        "5",
        "-m",
        "wm-point",
        "--runtime",
        "process",
        "--output-dir",
        str(tmp_path / "o"),
        "--dry-run",
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    record = json.loads((tmp_path / "o" / "launch.json").read_text())
    assert [t["trial_id"] for t in record["trials"]] == ["gated/wm-point/spooky-author-identification/seed7"]
    # The saved settings say what the trial runs with (was: the config's max_steps 500).
    settings = yaml.safe_load((tmp_path / "o" / "agent-config.yaml").read_text())
    assert settings["configurations"]["wm-point"]["budget"]["max_steps"] == 5


def test_kapso_modes_agents_and_knowledge_graph_flags(tmp_path: Path) -> None:
    """Kapso's runner command with its mode, agent and --no-kg runs (dry) here: MINIMAL is the tiny config."""
    args = ["-c", "spooky-author-identification", "--runtime", "process", "--dry-run"]
    minimal = run(*args, "-m", "MINIMAL", "-d", "aide", "--no-kg", "--output-dir", str(tmp_path / "m"))
    assert minimal.returncode == 0, minimal.stderr
    record = json.loads((tmp_path / "m" / "launch.json").read_text())
    assert record["config_path"].endswith("demo.yaml")
    assert [t["trial_id"] for t in record["trials"]] == ["gated/aide/spooky-author-identification/seed34"]
    full = run(*args, "-m", "MLE_CONFIGS", "--output-dir", str(tmp_path / "f"))
    assert full.returncode == 0, full.stderr
    assert json.loads((tmp_path / "f" / "launch.json").read_text())["config_path"].endswith("paper.yaml")
    # Without --output-dir the two modes' one trial goes to two dirs (one config per dir).
    for mode, name in (
        ("MINIMAL", "spooky-author-identification-aide-gated-minimal"),
        ("MLE_CONFIGS", "spooky-author-identification-aide-gated"),
    ):
        assert run(*args, "-m", mode, cwd=tmp_path).returncode == 0
        assert (tmp_path / "runs" / name / "launch.json").is_file()
    agents = run("--list-agents")
    assert agents.returncode == 0 and agents.stdout.startswith("aide\t")
    # The page's own form of the command, through the module path it names.
    kapso = subprocess.run(
        [sys.executable, "-m", "benchmarks.mle.runner", "--lite"],
        cwd=REPO, env={**os.environ, "PYTHONPATH": "."}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert kapso.returncode == 0 and len(kapso.stdout.splitlines()) == 22, kapso.stderr
    for bad, culprit in (
        (["-d", "aider"], "-d/--coding-agent: 'aider' is not available here; the one coding agent is aide"),
        (
            ["-m", "MINIMAL", "--config", "configs/paper.yaml"],
            "-m MINIMAL: Kapso's mode picks configs/demo.yaml",
        ),
    ):
        proc = run(*args, *bad, "--output-dir", str(tmp_path / "bad"))
        assert proc.returncode == 2 and culprit in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
        assert not (tmp_path / "bad").exists()


def test_listings() -> None:
    lite = run("--lite")
    assert lite.returncode == 0
    assert len(lite.stdout.splitlines()) == 22
    full = run("--list")
    assert "spooky-author-identification\tmle-bench" in full.stdout
    assert len(full.stdout.splitlines()) >= 82


def _config_with(tmp_path: Path, old: str, new: str, tasks: str | None = None) -> Path:
    text = (REPO / "configs" / "paper.yaml").read_text()
    assert old in text
    path = tmp_path / "paper.yaml"
    path.write_text(text.replace(old, new, 1))
    (tmp_path / "tasks.txt").write_text(
        tasks if tasks is not None else (REPO / "configs" / "tasks.txt").read_text()
    )
    return path


BAD_CONFIGS = [
    (
        "unknown key",
        "budget:\n  time_limit_s: 43200",
        "budget:\n  time_limt_s: 43200",
        None,
        "budget.time_limt_s: unknown key",
    ),
    ("wrong type", "max_steps: 500", "max_steps: lots", None, "budget.max_steps: "),
    (
        "unknown task",
        "tasks: tasks.txt",
        "tasks: tasks.txt",
        "leaf-classification\nno-such-comp\n",
        "tasks.txt:2: unknown task id 'no-such-comp'",
    ),
    (
        "duplicate task",
        "tasks: tasks.txt",
        "tasks: tasks.txt",
        "leaf-classification\n# c\nleaf-classification\n",
        "tasks.txt:3: duplicate task 'leaf-classification'",
    ),
    ("empty tasks", "tasks: tasks.txt", "tasks: tasks.txt", "# nothing\n\n", "the task list is empty"),
    ("empty seeds", "seeds: [34, 35, 36]", "seeds: []", None, "seeds: "),
    ("bad yaml", "version: 1", "version: [1", None, "invalid YAML at line"),
    (
        "bad configuration knob",
        "candidates: 4, selection: pointwise",
        "candidates: 0, selection: pointwise",
        None,
        "configurations.wm-rank4.world_model.candidates: ",
    ),
    (
        "unknown configuration key",
        "world_model: {enabled: false}",
        "world_model: {enabled: false, colour: red}",
        None,
        "configurations.aide.world_model.colour: unknown key",
    ),
]


@pytest.mark.parametrize(
    ("name", "old", "new", "tasks", "message"), BAD_CONFIGS, ids=[c[0] for c in BAD_CONFIGS]
)
def test_bad_config_gives_one_line_and_exit_2(
    cli: Cli, tmp_path: Path, name: str, old: str, new: str, tasks: str | None, message: str
) -> None:
    config = _config_with(tmp_path, old, new, tasks)
    out = tmp_path / "out"
    proc = cli.run(
        "--config",
        str(config),
        "--regime",
        "gated",
        "--output-dir",
        str(out),
        "--dry-run",
        "--enroot-image",
        "/i.sqsh",
        cwd=REPO,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert message in lines[0]
    assert "Traceback" not in proc.stderr
    assert not out.exists()  # nothing half-written


BAD_FLAGS = [
    (["--regime", "gated", "--dry-run"], "--output-dir is required"),
    (["--output-dir", "x", "--dry-run"], "--regime is required"),
    (["--regime", "sideways"], "argument --regime: invalid choice"),
    (["--regime", "gated", "--output-dir", "x", "--configs", "wm-nope", "--dry-run"], "--configs: unknown"),
    (["--regime", "gated", "--output-dir", "x", "--seeds", "a,b", "--dry-run"], "--seeds"),
    (["--regime", "gated", "--output-dir", "x", "--tasks", "nope", "--dry-run"], "--tasks: unknown task id"),
    (["--regime", "gated", "--output-dir", "x", "--n-workers", "0", "--dry-run"], "--n-workers"),
    (["--regime", "gated", "--output-dir", "x", "--dry-run"], "--enroot-image is required"),
    (
        ["--regime", "gated", "--output-dir", "x", "--config", "/nonexistent.yaml", "--dry-run"],
        "config not found",
    ),
    (["--bogus"], "unrecognized arguments: --bogus"),
]


@pytest.mark.parametrize(("args", "message"), BAD_FLAGS, ids=[m for _, m in BAD_FLAGS])
def test_bad_flags_give_one_line_and_exit_2(cli: Cli, tmp_path: Path, args: list[str], message: str) -> None:
    proc = cli.run(*args, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert not (tmp_path / "x").exists()


def test_no_sandbox_warning_is_loud_and_recorded(tmp_path: Path) -> None:
    proc = run(
        "--regime",
        "gated",
        "--output-dir",
        str(tmp_path / "o"),
        "--runtime",
        "process",
        "--no-sandbox",
        "--tasks",
        "leaf-classification",
        "--configs",
        "aide",
        "--seeds",
        "34",
        "--dry-run",
    )
    assert proc.returncode == 0, proc.stderr
    assert "WARNING: --no-sandbox" in proc.stderr
    record = json.loads((tmp_path / "o" / "launch.json").read_text())
    assert record["sandbox"] is False and "--no-sandbox" in record["warnings"][0]


def test_a_one_trial_request_fills_in_the_output_dir_and_gpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`-c` fills in the output dir, and $CUDA_DEVICE the GPUs, from the request built once from the flags."""
    from mle_world.cli.commands import COMMANDS
    from mle_world.cli.planning import plan_sweep
    from mle_world.cli.request import SweepRequest
    from mle_world.cli.sweep import build_run_parser, launch_options

    monkeypatch.chdir(tmp_path)
    argv = ("-c", "iris-species", "--runtime", "process", "--dry-run")
    args = build_run_parser(tuple(COMMANDS)).parse_args(argv)
    request = SweepRequest.from_args(args, argv, {"CUDA_DEVICE": "3"})
    plan, _, _ = plan_sweep(request)
    assert (
        plan.output_dir
        == tmp_path / "runs" / f"iris-species-{plan.commands[0].trial.spec.configuration}-gated"
    )
    assert plan.record.argv == argv
    assert launch_options(request).gpu_devices == ("3",)


def test_task_list_is_readable_by_mlebench_prepare_list() -> None:
    # The seed README runs `mlebench prepare --list configs/tasks.txt`; MLE-bench's CLI takes every line
    # as a competition id (`f.read().splitlines()`, mlebench/cli.py), so a comment or a blank line
    # there made it fail on its first line.
    from mle_world.tasks.registry import load_registry

    registry = load_registry()
    lines = (REPO / "configs" / "tasks.txt").read_text().splitlines()
    assert len(lines) == 17
    assert [line for line in lines if line not in registry or registry.is_local(line)] == []
