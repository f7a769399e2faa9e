"""Every bad input found by trying the CLI: exit 2, one stderr line naming the culprit, no traceback,
and nothing written or changed (the output dir is byte-identical before and after).

Runs `mle_world.cli.main` in process (tests/support/clikit.py), and `run_paper.py` in a real subprocess
where the process is what is tested; reads and writes only pytest's tmp paths.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from clikit import Cli, CliResult

REPO = Path(__file__).resolve().parents[2]
DRY = [
    "--enroot-image",
    "/img/aide.sqsh",
    "--data-dir",
    "/data",
    "--regime",
    "gated",
    "--dry-run",
    "--summary",
]


def run_process(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPO / "run_paper.py"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def snapshot(root: Path) -> dict[str, str]:
    """Every file under root with its sha256 (directories as 'dir'): what 'byte-identical' compares."""
    if not root.exists():
        return {}
    out = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        out[rel] = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def assert_one_line_error(proc: subprocess.CompletedProcess[str] | CliResult, *culprits: str) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for culprit in culprits:
        assert culprit in lines[0], (culprit, lines[0])
    return lines[0]


def assert_refused(
    cli: Cli, tmp_path: Path, args: Sequence[str], *culprits: str, watch: Path | None = None
) -> str:
    watch = watch or tmp_path
    before = snapshot(watch)
    proc = cli.run(*args, cwd=tmp_path)
    line = assert_one_line_error(proc, *culprits)
    assert snapshot(watch) == before, "a refused command changed files"
    return line


# --- through the real process: exit code, stderr and no traceback as the user sees them --------------


@pytest.mark.parametrize(
    ("args", "culprit"),
    [
        ([*DRY, "--output-dir", "o", "--n-workers", "0"], "--n-workers"),  # argparse's (Parser.error)
        ([*DRY, "--output-dir", "o", "--no-wait"], "--no-wait"),  # a SweepRequest rule
        ([*DRY, "--output-dir", "o" * 300], "o" * 300),  # the OS's (name too long), caught by main
        (["statu", "o"], "unknown command 'statu'"),  # a mistyped subcommand
    ],
    ids=["argparse", "request", "os", "command"],
)
def test_a_refusal_through_run_paper_is_one_line_and_exit_2(
    tmp_path: Path, args: list[str], culprit: str
) -> None:
    """The other tests call main in process; this one is the process: run()'s exit code, stderr as
    written to the pipe, and nothing left behind."""
    before = snapshot(tmp_path)
    proc = run_process(*args, cwd=tmp_path)
    assert_one_line_error(proc, culprit)
    assert proc.stderr.startswith("run_paper.py: error: ") and proc.stdout == ""
    assert snapshot(tmp_path) == before


# --- output locations -------------------------------------------------------------------------------


def test_output_dir_that_cannot_be_created(cli: Cli, tmp_path: Path) -> None:
    assert_refused(
        cli, tmp_path, [*DRY, "--output-dir", "/proc/mle-world-out"], "--output-dir", "/proc/mle-world-out"
    )


def test_output_dir_that_is_a_file(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("keep me\n")
    assert_refused(
        cli, tmp_path, [*DRY, "--output-dir", str(tmp_path / "afile")], "--output-dir", "not a directory"
    )


def test_output_dir_under_a_file(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("keep me\n")
    assert_refused(cli, tmp_path, [*DRY, "--output-dir", str(tmp_path / "afile" / "x")], "--output-dir")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_output_dir_without_write_permission(cli: Cli, tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    assert_refused(cli, tmp_path, [*DRY, "--output-dir", str(locked / "out")], "--output-dir")


def test_audit_out_under_a_file(cli: Cli, tmp_path: Path) -> None:
    out = _tiny_output_dir(cli, tmp_path)
    (tmp_path / "afile").write_text("keep me\n")
    assert_refused(cli, tmp_path, ["audit", str(out), "--out", str(tmp_path / "afile" / "x")], "--out")


def test_prepare_data_dir_that_is_a_file(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("keep me\n")
    args = ["prepare", "--tasks", "iris-species", "--data-dir", str(tmp_path / "afile")]
    assert_refused(cli, tmp_path, args, "--data-dir")


# --- a dry run validates every flag a real run would ------------------------------------------------


@pytest.mark.parametrize("value", ["x", "0,,1", "3-1", "-1"])
def test_dry_run_rejects_bad_gpu_device(cli: Cli, tmp_path: Path, value: str) -> None:
    assert_refused(
        cli, tmp_path, [*DRY, "--output-dir", str(tmp_path / "o"), "--gpu-device", value], "--gpu-device"
    )


@pytest.mark.parametrize(
    "value", ["not-a-url", "http://[::1", "ftp://host/v1", "http://", "http://host:99999/v1"]
)
def test_dry_run_rejects_bad_endpoint_url(cli: Cli, tmp_path: Path, value: str) -> None:
    assert_refused(
        cli, tmp_path, [*DRY, "--output-dir", str(tmp_path / "o"), "--coder-url", value], "--coder-url"
    )


def test_check_endpoints_rejects_bad_url(cli: Cli, tmp_path: Path) -> None:
    assert_refused(cli, tmp_path, ["check-endpoints", "--world-url", "http://[::1"], "--world-url")


def test_bad_url_in_an_endpoints_file_names_the_file_not_a_flag(cli: Cli, tmp_path: Path) -> None:
    """Was '--coder-url: Value error, ...' for a URL that came from --endpoints-file."""
    (tmp_path / "endpoints.yaml").write_text("coder: [ftp://x/v1]\n")
    line = assert_refused(
        cli, tmp_path, ["check-endpoints", "--endpoints-file", "endpoints.yaml"], "endpoints.yaml: coder:"
    )
    assert "Value error" not in line and "--coder-url" not in line


def test_yaml_endpoint_url_is_validated_when_read(cli: Cli, tmp_path: Path) -> None:
    text = (REPO / "configs/paper.yaml").read_text()
    assert "url: http://localhost:8001/v1" in text
    config = tmp_path / "paper.yaml"
    config.write_text(text.replace("url: http://localhost:8001/v1", "url: ':bad'", 1))
    for args in (
        [*DRY, "--config", str(config), "--output-dir", str(tmp_path / "o")],
        ["check-endpoints", "--config", str(config)],
    ):
        line = assert_refused(cli, tmp_path, args, str(config), "url")
        assert "endpoints" in line


def test_malformed_prices_refused_before_anything_launches(cli: Cli, tmp_path: Path) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_text("models: [this is: not a mapping\n")
    line = assert_refused(
        cli, tmp_path, [*DRY, "--output-dir", str(tmp_path / "o"), "--prices", str(prices)], "--prices"
    )
    assert str(prices) in line


def test_prices_with_an_unknown_field_refused(cli: Cli, tmp_path: Path) -> None:
    prices = tmp_path / "prices.yaml"
    good = (REPO / "configs/prices.yaml").read_text()
    prices.write_text(good + "\nunknown_field: 1\n")
    assert_refused(
        cli, tmp_path, [*DRY, "--output-dir", str(tmp_path / "o"), "--prices", str(prices)], str(prices)
    )


def test_missing_prices_file_refused(cli: Cli, tmp_path: Path) -> None:
    args = [*DRY, "--output-dir", str(tmp_path / "o"), "--prices", str(tmp_path / "nope.yaml")]
    assert_refused(cli, tmp_path, args, "nope.yaml")


# --- YAML ----------------------------------------------------------------------------------------


def test_duplicate_configuration_key_in_paper_yaml(cli: Cli, tmp_path: Path) -> None:
    text = (REPO / "configs/paper.yaml").read_text()
    marker = "configurations:\n"
    assert marker in text
    # A second `aide:` under configurations used to silently replace the baseline.
    head, tail = text.split(marker, 1)
    indent = tail[: len(tail) - len(tail.lstrip(" "))]
    config = tmp_path / "paper.yaml"
    config.write_text(head + marker + tail + f"{indent}aide:\n{indent}  world_model: null\n")
    line = assert_refused(
        cli, tmp_path, [*DRY, "--config", str(config), "--output-dir", str(tmp_path / "o")], str(config)
    )
    assert "duplicate" in line and "aide" in line


def test_duplicate_key_in_cluster_yaml(cli: Cli, tmp_path: Path) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text((REPO / "configs/cluster.yaml").read_text() + "\nlaunch:\n  max_attempts: 1\n")
    args = [*DRY, "--cluster-config", str(cluster), "--output-dir", str(tmp_path / "o")]
    line = assert_refused(cli, tmp_path, args, str(cluster))
    assert "duplicate" in line and "launch" in line


def test_duplicate_key_in_prices_yaml(cli: Cli, tmp_path: Path) -> None:
    prices = tmp_path / "prices.yaml"
    text = (REPO / "configs/prices.yaml").read_text()
    first_key = next(line.split(":")[0] for line in text.splitlines() if line and line[0].isalpha())
    prices.write_text(text + f"\n{first_key}: {{}}\n")
    line = assert_refused(
        cli, tmp_path, [*DRY, "--output-dir", str(tmp_path / "o"), "--prices", str(prices)], str(prices)
    )
    assert "duplicate" in line


# --- seeds -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["99", "34,99", "", ",", "x"])
def test_seeds_outside_the_config_are_refused(cli: Cli, tmp_path: Path, value: str) -> None:
    assert_refused(cli, tmp_path, [*DRY, "--output-dir", str(tmp_path / "o"), "--seeds", value], "--seeds")


def test_seeds_subset_is_accepted(cli: Cli, tmp_path: Path) -> None:
    proc = cli.run(*DRY, "--output-dir", str(tmp_path / "o"), "--seeds", "35", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    record = json.loads((tmp_path / "o/launch.json").read_text())
    assert {t["trial_id"].rsplit("seed", 1)[1] for t in record["trials"]} == {"35"}


# --- directories that are not output dirs ----------------------------------------------------------


@pytest.mark.parametrize("command", ["audit", "status", "grade", "digest"])
def test_not_an_output_dir(cli: Cli, tmp_path: Path, command: str) -> None:
    stranger = tmp_path / "etc-like"
    stranger.mkdir()
    (stranger / "passwd").write_text("root:x:0:0\n")
    line = assert_refused(cli, tmp_path, [command, str(stranger)], str(stranger))
    assert "launch.json" in line or "output dir" in line


NOT_UTF8 = b"\xff\xfe\x00 not text"


@pytest.mark.parametrize(
    ("args", "culprit"),
    [
        ([*DRY, "--output-dir", "o", "--config", "bad.yaml"], "bad.yaml: config is not UTF-8 text"),
        ([*DRY, "--output-dir", "o", "--prices", "bad.yaml"], "bad.yaml: price table is not UTF-8 text"),
        (
            [*DRY, "--output-dir", "o", "--cluster-config", "bad.yaml"],
            "bad.yaml: cluster config is not UTF-8",
        ),
        (
            [*DRY, "--output-dir", "o", "--endpoints-file", "bad.yaml"],
            "bad.yaml: endpoints file is not UTF-8",
        ),
        (
            ["estimate", "--regime", "gated", "--cluster-config", "bad.yaml"],
            "bad.yaml: cluster config is not",
        ),
        (["--list", "--competitions-dir", "comps"], "comps/mine/config.yaml: not UTF-8 text"),
        (
            ["estimate", "--regime", "gated", "--measured", "swept"],
            "swept/launch.json: not a readable launch.json",
        ),
    ],
)
def test_a_file_that_is_not_utf8_is_one_line(cli: Cli, tmp_path: Path, args: list[str], culprit: str) -> None:
    """Each was a UnicodeDecodeError traceback, exit 1: only OSError was caught around the read."""
    (tmp_path / "bad.yaml").write_bytes(NOT_UTF8)
    (tmp_path / "comps" / "mine").mkdir(parents=True)
    (tmp_path / "comps" / "mine" / "config.yaml").write_bytes(NOT_UTF8)
    (tmp_path / "swept").mkdir()
    (tmp_path / "swept" / "launch.json").write_bytes(NOT_UTF8)
    line = assert_refused(cli, tmp_path, args, culprit)
    # A YAML file says where its text stops being UTF-8; launch.json is read as bytes, as JSON.
    assert "byte 0xff at offset 0" in line or "not a readable launch.json" in line, line


@pytest.mark.parametrize(
    ("args", "culprit"),
    [
        (["estimate", "--regime", "gated", "--usd-per-gpu-hour", "inf"], "--usd-per-gpu-hour"),
        (["estimate", "--regime", "gated", "--usd-per-gpu-hour", "nan"], "--usd-per-gpu-hour"),
        (["estimate", "--regime", "gated", "--prices", "inf-prices.yaml"], "inf-prices.yaml"),
        (["status", ".", "--watch", "--interval", "1e10"], "--interval"),  # was OverflowError from sleep
        (["status", ".", "--watch", "--interval", "inf"], "--interval"),
    ],
)
def test_numbers_that_are_not_finite_are_refused(
    cli: Cli, tmp_path: Path, args: list[str], culprit: str
) -> None:
    """inf was taken as a price ($inf sweeps), and a watch interval past time_t was a traceback."""
    prices = (REPO / "configs" / "prices.yaml").read_text()
    assert "execution: {usd_per_gpu_hour: 2.50}" in prices
    inf = prices.replace("execution: {usd_per_gpu_hour: 2.50}", "execution: {usd_per_gpu_hour: .inf}")
    (tmp_path / "inf-prices.yaml").write_text(inf)
    assert_refused(cli, tmp_path, args, culprit)


@pytest.mark.parametrize(
    ("args", "culprit"),
    [
        (["status", ".", "--lines", "5"], "status: --lines applies with --trial only"),
        (["status", ".", "--interval", "5"], "status: --interval applies with --watch only"),
        (
            ["status", ".", "--trial", "x", "--costs"],
            "status: --costs is the sweep's spend: not with --trial",
        ),
        (
            ["estimate", "--regime", "gated", "--prices", "p.yaml", "--usd-per-gpu-hour", "1"],
            "exclude each other",
        ),
    ],
)
def test_a_flag_the_command_would_ignore_is_refused(
    cli: Cli, tmp_path: Path, args: list[str], culprit: str
) -> None:
    """Each was accepted and dropped: the user meant something the output then did not show."""
    assert_refused(cli, tmp_path, args, culprit)


FILE_WHERE_A_DIR_GOES = [
    ["status", "f"],
    ["cancel", "f"],
    ["audit", "f"],
    ["grade", "f"],
    ["digest", "f"],
    ["show", "f"],
    ["estimate", "--regime", "gated", "--measured", "f"],
    [*DRY, "--output-dir", "o", "--competitions-dir", "f"],
    [
        *("--regime", "gated", "--output-dir", "o", "--runtime", "process", "--no-endpoint-check"),
        *(
            "--tasks",
            "iris-species",
            "--configs",
            "aide",
            "--seeds",
            "34",
            "--gpu-device",
            "none",
            "--data-dir",
            "f",
        ),
    ],
]


@pytest.mark.parametrize(
    "args", FILE_WHERE_A_DIR_GOES, ids=lambda a: a[0] if a[0] != "--enroot-image" else "sweep"
)
def test_a_file_where_a_directory_goes_is_named_as_such(cli: Cli, tmp_path: Path, args: list[str]) -> None:
    """Was 'no such directory' for a file there, and a --data-dir that is a file said to prepare into it."""
    (tmp_path / "f").write_text("not a directory\n")
    assert_refused(cli, tmp_path, args, "f: not a directory (a file of that name exists)")


def test_audit_of_a_missing_dir(cli: Cli, tmp_path: Path) -> None:
    assert_refused(cli, tmp_path, ["audit", str(tmp_path / "nope")], "nope")


# --- corrupt bookkeeping ---------------------------------------------------------------------------


def _tiny_output_dir(cli: Cli, tmp_path: Path) -> Path:
    """A real dry-run output dir of the demo config (launch.json, agent-config.yaml)."""
    out = tmp_path / "sweep"
    proc = cli.run(
        "--config", str(REPO / "configs/demo.yaml"), "--regime", "ungated", "--runtime", "process",
        "--output-dir", str(out), "--data-dir", str(tmp_path / "data"), "--dry-run", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return out


def test_status_names_a_corrupt_status_json(cli: Cli, tmp_path: Path) -> None:
    out = _tiny_output_dir(cli, tmp_path)
    record = json.loads((out / "launch.json").read_text())
    trial_dir = Path(record["trials"][0]["trial_dir"])
    trial_dir.mkdir(parents=True)
    (trial_dir / "status.json").write_text('{"state": "succ')
    proc = cli.run("status", str(out), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert str(trial_dir / "status.json") in proc.stderr
    assert "all trials finished" not in proc.stdout


def test_status_shows_trials_whose_launcher_is_gone(cli: Cli, tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from mle_world.records import TrialStatus

    out = _tiny_output_dir(cli, tmp_path)
    trial = json.loads((out / "launch.json").read_text())["trials"][0]
    trial_dir = Path(trial["trial_dir"])
    trial_dir.mkdir(parents=True)
    status = TrialStatus(
        trial_id=trial["trial_id"], state="running", backend="local", attempt=1, started_at=datetime.now(UTC)
    )
    (trial_dir / "status.json").write_text(status.model_dump_json())
    proc = cli.run("status", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "launcher is gone" in " ".join(proc.stdout.split())
    assert "all trials finished" not in proc.stdout


# --- cluster.yaml container.mounts reach every runtime ---------------------------------------------


def _cluster_with_mounts(tmp_path: Path, *mounts: str) -> Path:
    text = (REPO / "configs/cluster.yaml").read_text()
    assert "mounts: []" in text
    listed = ", ".join(json.dumps(m) for m in mounts)
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(text.replace("mounts: []", f"mounts: [{listed}]", 1))
    return cluster


@pytest.mark.parametrize(
    ("runtime", "expected"),
    [
        ("enroot", "/opt/pip-cache:/root/.cache/pip:none:rbind,ro"),
        ("pyxis", "/opt/pip-cache:/root/.cache/pip:ro"),
        ("process", "--ro-bind /opt/pip-cache /root/.cache/pip"),
    ],
)
def test_container_mounts_are_rendered_for_every_runtime(
    cli: Cli, tmp_path: Path, runtime: str, expected: str
) -> None:
    cluster = _cluster_with_mounts(tmp_path, "/opt/pip-cache:/root/.cache/pip")
    proc = cli.run(
        "--enroot-image", "/img/aide.sqsh", "--data-dir", str(tmp_path / "data"), "--regime", "gated",
        "--runtime", runtime, "--cluster-config", str(cluster), "--output-dir", str(tmp_path / "o"),
        "--dry-run", "--seeds", "34", "--tasks", "spooky-author-identification", "--configs", "aide",
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert expected in proc.stdout


@pytest.mark.parametrize("mount", ["relative:/x", "/a", "/a:b", "/a,b:/x"])
def test_malformed_container_mount_refused(cli: Cli, tmp_path: Path, mount: str) -> None:
    cluster = _cluster_with_mounts(tmp_path, mount)
    args = [*DRY, "--cluster-config", str(cluster), "--output-dir", str(tmp_path / "o")]
    line = assert_refused(cli, tmp_path, args, str(cluster))
    assert "container.mounts" in line


def test_container_mount_showing_private_answers_refused(cli: Cli, tmp_path: Path) -> None:
    data = tmp_path / "data"
    cluster = _cluster_with_mounts(tmp_path, f"{data}:/mnt/data")
    args = [
        "--enroot-image", "/img/aide.sqsh", "--data-dir", str(data), "--regime", "gated", "--dry-run",
        "--cluster-config", str(cluster), "--output-dir", str(tmp_path / "o"),
    ]  # fmt: skip
    line = assert_refused(cli, tmp_path, args, "container.mounts")
    assert "private" in line


def test_one_trial_seed_outside_the_config_is_part_of_the_identity(cli: Cli, tmp_path: Path) -> None:
    base = ["-c", "spooky-author-identification", "-m", "aide", "--enroot-image", "/img/aide.sqsh",
            "--data-dir", "/data", "--output-dir", str(tmp_path / "o"), "--dry-run"]  # fmt: skip
    one = cli.run(*base, "--seed", "1", cwd=tmp_path)
    assert one.returncode == 0, one.stderr
    first = json.loads((tmp_path / "o/launch.json").read_text())
    other = cli.run(*base, "--seed", "34", cwd=tmp_path)
    assert other.returncode == 0, other.stderr
    second = json.loads((tmp_path / "o/launch.json").read_text())
    assert first["trials"][0]["trial_id"].endswith("seed1")
    assert first["config_hash"] != second["config_hash"]


# --- more bad flags found by trying them ------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "culprit"),
    [
        (["--tasks", ""], "--tasks"),
        (["--configs", ","], "--configs"),
        (["--coder-model", " "], "--coder-model"),
        (["--n-workers", "0"], "--n-workers"),
        (["--config", "/nonexistent/paper.yaml"], "/nonexistent/paper.yaml"),
        (["--competitions-dir", "/nonexistent/comps"], "--competitions-dir"),
    ],
)
def test_more_bad_sweep_flags(cli: Cli, tmp_path: Path, extra: list[str], culprit: str) -> None:
    assert_refused(cli, tmp_path, [*DRY, "--output-dir", str(tmp_path / "o"), *extra], culprit)


def test_one_trial_flags_named_in_errors(cli: Cli, tmp_path: Path) -> None:
    base = [
        "--enroot-image",
        "/img/a.sqsh",
        "--data-dir",
        "/data",
        "--output-dir",
        str(tmp_path / "o"),
        "--dry-run",
    ]
    assert_refused(
        cli, tmp_path, [*base, "-c", "no-such-competition"], "-c/--competition", "no-such-competition"
    )
    assert_refused(cli, tmp_path, [*base, "-c", "iris-species", "-m", "nope"], "-m/--configuration", "nope")


def test_output_dir_name_too_long(cli: Cli, tmp_path: Path) -> None:
    name = "o" * 300
    assert_refused(cli, tmp_path, [*DRY, "--output-dir", str(tmp_path / name)], name)


# --- empty values: `--data-dir "$DATA_DIR"` in a shell where the variable is not set ---------------------


@pytest.mark.parametrize(
    "flag",
    [
        "--output-dir",
        "--data-dir",
        "--enroot-image",
        "--config",
        "--prices",
        "--coder-url",
        "--world-url",
        "-c",
    ],
)
def test_empty_flag_value_refused_not_taken_as_cwd_or_default(cli: Cli, tmp_path: Path, flag: str) -> None:
    # Path("") is the working directory and an empty URL was taken as "not given": both ran silently
    # (launch.json written into the cwd, the default localhost endpoint probed).
    args = [*DRY, "--output-dir", str(tmp_path / "o"), flag, ""]
    line = assert_refused(cli, tmp_path, args, flag, "empty")
    assert "shell variable" in line


@pytest.mark.parametrize(
    "args",
    [
        ["status", ""],
        ["audit", ""],
        ["digest", ""],
        ["grade", "x", "--data-dir", ""],
        ["estimate", "--regime", "gated", "--config", ""],
    ],
)
def test_empty_path_refused_by_subcommands(cli: Cli, tmp_path: Path, args: list[str]) -> None:
    assert_refused(cli, tmp_path, args, "empty")


# --- regrade and page locations ------------------------------------------------------------------------


def test_grade_with_a_missing_data_dir(cli: Cli, tmp_path: Path) -> None:
    out = _tiny_output_dir(cli, tmp_path)
    # Was: one "answers missing" line per trial, exit 1, and the cost CSVs rewritten.
    assert_refused(
        cli, tmp_path, ["grade", str(out), "--data-dir", str(tmp_path / "nope")], "--data-dir", "nope"
    )
    # Without the flag, the sweep's own data dir (launch.json) is the one named.
    assert_refused(cli, tmp_path, ["grade", str(out)], "launch.json", str(tmp_path / "data"))


def test_show_out_under_a_file(cli: Cli, tmp_path: Path) -> None:
    out = _tiny_output_dir(cli, tmp_path)
    record = json.loads((out / "launch.json").read_text())
    trial_dir = Path(record["trials"][0]["trial_dir"])
    trial_dir.mkdir(parents=True)
    (trial_dir / "status.json").write_text(json.dumps({"trial_id": record["trials"][0]["trial_id"]}))
    (tmp_path / "afile").write_text("x")
    # Was: "cannot write .../afile/page.html: File exists".
    assert_refused(
        cli,
        tmp_path,
        ["show", str(trial_dir), "--out", str(tmp_path / "afile" / "page.html")],
        "--out",
        "afile",
    )
    assert_refused(cli, tmp_path, ["show", str(trial_dir), "--out", str(tmp_path)], "--out", "directory")


def test_audit_and_show_where_they_cannot_write_point_at_out(cli: Cli, tmp_path: Path) -> None:
    """Someone else's sweep is read-only to you: the default places' refusals name --out, the way around."""
    out = _tiny_output_dir(cli, tmp_path)
    record = json.loads((out / "launch.json").read_text())
    trial_dir = Path(record["trials"][0]["trial_dir"])
    trial_dir.mkdir(parents=True)
    (trial_dir / "status.json").write_text(json.dumps({"trial_id": record["trials"][0]["trial_id"]}))
    (out / "audit").write_text("in the way\n")  # as a dir without write permission would be, for root too
    assert_refused(cli, tmp_path, ["audit", str(out)], "audit", "write the audit elsewhere with --out DIR")
    (trial_dir / "trial.html").mkdir()
    assert_refused(
        cli, tmp_path, ["show", str(trial_dir)], "cannot write", "write the page elsewhere with --out FILE"
    )


def test_prepare_refused_for_credentials_leaves_no_data_dir(cli: Cli, tmp_path: Path) -> None:
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("KAGGLE_")}
    env["HOME"] = str(tmp_path / "home")  # no ~/.kaggle/kaggle.json
    data = tmp_path / "new-data"
    args = ["prepare", "--tasks", "iris-species,spooky-author-identification", "--data-dir", str(data)]
    assert_one_line_error(cli.run(*args, cwd=tmp_path, env=env), "Kaggle")
    assert not data.exists()  # was: created empty before the credentials were checked


def test_audit_out_where_the_os_refuses_names_the_flag(cli: Cli, tmp_path: Path) -> None:
    out = _tiny_output_dir(cli, tmp_path)
    # Was: "/proc/mle-world-audit: No such file or directory", without the flag.
    assert_refused(
        cli, tmp_path, ["audit", str(out), "--out", "/proc/mle-world-audit"], "--out", "/proc/mle-world-audit"
    )


def test_prepare_data_dir_where_the_os_refuses_names_the_flag(cli: Cli, tmp_path: Path) -> None:
    args = ["prepare", "--config", str(REPO / "configs/demo.yaml"), "--data-dir", "/proc/mle-world-data"]
    assert_refused(cli, tmp_path, args, "--data-dir", "/proc/mle-world-data")


@pytest.mark.parametrize(
    ("flag", "value"), [("--tasks", "diabetes-progression"), ("--configs", "wm-point"), ("--seeds", "34")]
)
def test_sweep_filters_do_not_combine_with_one_trial_mode(
    cli: Cli, tmp_path: Path, flag: str, value: str
) -> None:
    # Was silently ignored: `-c iris-species --configs wm-point` planned the aide trial.
    args = ["--config", str(REPO / "configs/demo.yaml"), "--runtime", "process", "--dry-run"]
    args += ["--output-dir", str(tmp_path / "o"), "-c", "iris-species", flag, value]
    assert_refused(cli, tmp_path, args, flag, "-c")


@pytest.mark.parametrize(
    ("extra", "culprit"),
    [
        (["--parallelism", "0"], "--parallelism"),  # was a traceback (ArgumentTypeError raised by hand)
        (["--parallelism", "abc"], "--parallelism"),
        (["--overhead-s", "inf"], "--overhead-s"),
        (["--handoff-s", "-1"], "--handoff-s"),
    ],
)
def test_bad_estimate_flags(cli: Cli, tmp_path: Path, extra: list[str], culprit: str) -> None:
    assert_refused(cli, tmp_path, ["estimate", "--regime", "gated", *extra], culprit)


def test_mistyped_subcommand_names_the_commands(cli: Cli, tmp_path: Path) -> None:
    # Was: "unrecognized arguments: statu runs/x".
    assert_refused(cli, tmp_path, ["statu", str(tmp_path)], "statu", "status")


def test_bad_cuda_device_is_named(cli: Cli, tmp_path: Path) -> None:
    # `-c` takes its GPU from $CUDA_DEVICE; the error named --gpu-device, a flag the user had not given.
    args = ["-c", "iris-species", "--config", str(REPO / "configs/demo.yaml")]
    args += ["--runtime", "process", "--output-dir", str(tmp_path / "o"), "--dry-run"]
    assert_one_line_error(cli.run(*args, cwd=tmp_path, env={"CUDA_DEVICE": "abc"}), "CUDA_DEVICE='abc'")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("slurm", "launch", "advice"),
    [
        (
            {"grading_margin_min": 10},
            {},
            "raise slurm.grading_margin_min to 18 or lower launch.wall_grace_s below 480 s",
        ),
        ({"grading_margin_min": 2}, {"wall_grace_s": 0}, "raise slurm.grading_margin_min to 3"),
    ],
)
def test_a_grading_margin_the_wall_grace_would_use_up_is_refused(
    cli: Cli, tmp_path: Path, slurm: dict[str, int], launch: dict[str, int], advice: str
) -> None:
    """A trial at its wall limit (budget + wall_grace_s) is SIGTERMed, SIGKILLed 30 s later, and the job
    gets submitit's USR2 90 s before its --time (budget + grading_margin_min): with a margin not above
    wall_grace_s + 120 s such a trial is checkpointed and requeued before its grading runs, every attempt."""
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(json.dumps({"slurm": slurm, "launch": launch}))
    args = [*DRY, "--cluster-config", str(cluster), "--output-dir", str(tmp_path / "o")]
    line = assert_refused(cli, tmp_path, args, str(cluster))
    margin = slurm["grading_margin_min"]
    grace = launch.get("wall_grace_s", 900)
    assert line.startswith(
        f"run_paper.py: error: {cluster}: slurm.grading_margin_min {margin} ({margin * 60} s) must exceed "
        "launch.wall_grace_s "
        f"({grace} s) + 120 s: "
    )
    assert line.endswith(advice)


@pytest.mark.skipif(
    shutil.which("nvidia-smi", path="/usr/local/bin:/usr/bin:/bin") is not None,
    reason="this host has nvidia-smi",
)
def test_default_gpu_on_a_host_without_gpus_is_refused_before_launch(cli: Cli, tmp_path: Path) -> None:
    """`-c X --runtime process` on a laptop took --gpu-device 0 and the trial failed as infra at its GPU check."""
    args = ["-c", "iris-species", "-m", "MINIMAL", "--runtime", "process", "--output-dir", "o"]
    line = assert_refused(
        cli, tmp_path, [*args, "--no-endpoint-check"], "--gpu-device 0: this host has no nvidia-smi"
    )
    assert "--gpu-device none" in line


@pytest.mark.skipif(
    shutil.which("nvidia-smi", path="/usr/local/bin:/usr/bin:/bin") is not None,
    reason="this host has nvidia-smi",
)
def test_gpus_from_cuda_device_are_named_as_such(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """$CUDA_DEVICE gave the GPU: the refusal named --gpu-device 1, a flag the user never typed."""
    monkeypatch.setenv("CUDA_DEVICE", "1")
    args = ["-c", "iris-species", "-m", "MINIMAL", "--runtime", "process", "--output-dir", "o"]
    line = assert_refused(
        cli, tmp_path, [*args, "--no-endpoint-check"], "CUDA_DEVICE=1: this host has no nvidia-smi"
    )
    assert "--gpu-device none" in line
    monkeypatch.setenv("CUDA_DEVICE", "0")  # the flag wins over the environment, and is named
    assert_refused(
        cli,
        tmp_path,
        [*args, "--no-endpoint-check", "--gpu-device", "2"],
        "--gpu-device 2: this host has no nvidia-smi",
    )


def test_no_wait_needs_the_slurm_backend(cli: Cli, tmp_path: Path) -> None:
    """The local pool runs its trials in the launching process: there is nothing to leave running."""
    assert_refused(
        cli, tmp_path, [*DRY, "--output-dir", str(tmp_path / "o"), "--no-wait"], "--no-wait", "slurm"
    )


def test_an_endpoints_file_listing_no_replica_yet_is_refused(cli: Cli, tmp_path: Path) -> None:
    """Before any replica registered, the sweep silently used the config's localhost URLs."""
    (tmp_path / "endpoints.yaml").write_text("coder: []\n")
    assert_refused(
        cli,
        tmp_path,
        ["check-endpoints", "--endpoints-file", "endpoints.yaml"],
        "endpoints.yaml: lists no replica yet",
    )
    args = [*DRY, "--output-dir", "o", "--endpoints-file", "endpoints.yaml"]
    assert_refused(
        cli, tmp_path, args, "--endpoints-file endpoints.yaml: lists no replica yet", "wait-endpoints"
    )


def test_a_competitions_dir_without_a_competition_is_refused(cli: Cli, tmp_path: Path) -> None:
    """Was accepted silently: a sweep over the competition it was meant to define then said "unknown"."""
    (tmp_path / "comps" / "my-comp").mkdir(parents=True)  # no config.yaml in it
    for extra in (["--list"], [*DRY, "--output-dir", "o"]):
        assert_refused(
            cli,
            tmp_path,
            [*extra, "--competitions-dir", "comps"],
            "--competitions-dir comps: no competition in it",
        )
    assert not (tmp_path / "o").exists()


def test_a_competition_config_that_is_not_yaml_is_one_plain_line(cli: Cli, tmp_path: Path) -> None:
    """Was the YAML parser's multi-part message quoted with literal \\n escapes and the source excerpt."""
    (tmp_path / "comps" / "bad").mkdir(parents=True)
    (tmp_path / "comps" / "bad" / "config.yaml").write_text("id: [\n")
    line = assert_refused(
        cli, tmp_path, ["--list", "--competitions-dir", "comps"], "bad/config.yaml: invalid YAML at line 2"
    )
    assert "\\n" not in line
