"""The runtime registry: each runtime one class under its name, the CLI's --runtime choices and rules
taken from it.

Runs the CLI in-process; writes only under pytest's tmp paths.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mle_world.cli import main
from mle_world.errors import UserError
from mle_world.plan.config import load_cluster_config
from mle_world.plan.runtimes.registry import NAMES, RUNTIMES, listed, on_host, runtime_named, with_image

ONE_TRIAL = ["-c", "spooky-author-identification", "--data-dir", "/data", "--dry-run", "--no-progress"]


def test_each_runtime_is_registered_once_under_its_own_name() -> None:
    assert NAMES == ("enroot", "pyxis", "process")
    for name in NAMES:
        assert runtime_named(name) is RUNTIMES[name] and RUNTIMES[name].name == name
    assert with_image() == ("enroot", "pyxis") and on_host() == ("process",)
    assert listed(with_image()) == "enroot and pyxis" and listed(on_host()) == "process"


def test_an_unknown_runtime_is_one_line_naming_the_flag_and_the_choices() -> None:
    with pytest.raises(UserError) as caught:
        runtime_named("docker")
    assert str(caught.value) == "--runtime: unknown runtime 'docker' (choose from: enroot, pyxis, process)"


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
        (["--runtime", "pyxis", "--no-sandbox"], "--no-sandbox applies to --runtime process only"),
        (["--runtime", "pyxis"], "--enroot-image is required with --runtime pyxis"),
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
