"""The runtime registry: each runtime one class under its name, the CLI's --runtime choices and rules
taken from it, and a one-trial dry run of `--runtime apptainer` on both backends against golden files.

Golden files live in tests/plan/golden/; set UPDATE_GOLDEN=1 to re-record them (a missing one fails).
Runs the CLI in-process; writes only under pytest's tmp paths.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from mle_world.cli import main
from mle_world.errors import UserError
from mle_world.plan.config import load_cluster_config
from mle_world.plan.runtimes.registry import (
    NAMES,
    RUNTIMES,
    image_help,
    listed,
    on_host,
    runtime_named,
    with_image,
)

GOLDEN = Path(__file__).parent / "golden"
ONE_TRIAL = ["-c", "spooky-author-identification", "--data-dir", "/data", "--dry-run", "--no-progress"]


def test_each_runtime_is_registered_once_under_its_own_name() -> None:
    assert NAMES == ("enroot", "pyxis", "process", "apptainer")
    for name in NAMES:
        assert runtime_named(name) is RUNTIMES[name] and RUNTIMES[name].name == name
    assert with_image() == ("enroot", "pyxis", "apptainer") and on_host() == ("process",)
    assert listed(with_image()) == "enroot, pyxis and apptainer" and listed(on_host()) == "process"
    assert image_help() == ".sqsh for enroot and pyxis, .sif for apptainer"


def test_an_unknown_runtime_is_one_line_naming_the_flag_and_the_choices() -> None:
    with pytest.raises(UserError) as caught:
        runtime_named("docker")
    assert (
        str(caught.value)
        == "--runtime: unknown runtime 'docker' (choose from: enroot, pyxis, process, apptainer)"
    )


def _one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    return lines[0]


def test_a_bad_runtime_flag_is_one_line_exit_2_listing_the_registry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    line = _one_line_error(capsys, [*ONE_TRIAL, "--runtime", "docker", "--output-dir", str(tmp_path / "o")])
    assert "--runtime" in line and "'docker'" in line
    assert all(f"'{name}'" in line for name in NAMES)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--runtime", "apptainer", "--no-sandbox"], "--no-sandbox applies to --runtime process only"),
        (["--runtime", "apptainer"], "--enroot-image is required with --runtime apptainer"),
    ],
)
def test_the_registry_rules_reach_the_cli(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    flags: list[str],
    message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    line = _one_line_error(capsys, [*ONE_TRIAL, *flags, "--output-dir", str(tmp_path / "o")])
    assert message in line
    assert not (tmp_path / "o").exists()


def test_a_cluster_mount_must_be_expressible_in_every_runtime(tmp_path: Path) -> None:
    """cluster.yaml's mounts reach whichever runtime runs; the first runtime that cannot carry one says so."""
    path = tmp_path / "cluster.yaml"
    path.write_text('container:\n  mounts: ["/pip,cache:/root/.cache/pip"]\n')
    with pytest.raises(UserError) as caught:
        load_cluster_config(path)
    assert "'/pip,cache:/root/.cache/pip': pyxis --container-mounts cannot express ','" in str(caught.value)


@pytest.mark.parametrize("backend", ["local", "slurm"])
def test_an_apptainer_dry_run_of_one_trial_matches_golden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], backend: str
) -> None:
    """The command launch.json records for the trial (the same on both backends: the runtime decides
    --nv when the trial starts) and, for Slurm, the sbatch script that would run it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLE_SEED", raising=False)  # -c's seed would come from it
    out = tmp_path / "o"
    argv = [*ONE_TRIAL, "--runtime", "apptainer", "--enroot-image", "/images/aide.sif", "--backend", backend]
    assert main([*argv, "--output-dir", str(out)]) == 0
    capsys.readouterr()
    [trial] = json.loads((out / "launch.json").read_text())["trials"]
    text = trial["command"] + "\n"
    for preview in sorted((out / "slurm" / "preview").glob("*.sbatch")):
        text += f"\n# {preview.name}\n" + preview.read_text()
    assert ("sbatch" in text) == (backend == "slurm")
    text = text.replace(str(out), "<OUT>").replace(sys.executable, "<PYTHON>")
    golden = GOLDEN / f"apptainer-dry-run-{backend}.txt"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(text)
    assert golden.exists(), f"{golden} is missing: record it with UPDATE_GOLDEN=1 and review the diff"
    assert text == golden.read_text()
