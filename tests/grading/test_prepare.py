"""`prepare`: Kaggle credential checks and `mlebench prepare` failures, with a fake mlebench on PATH."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from mle_world.errors import UserError
from mle_world.tasks.local import is_prepared
from mle_world.tasks.prepare import check_kaggle_credentials, explain_prepare_failure, prepare_tasks


def write_token(home: Path, mode: int = 0o600, data: object | None = None) -> Path:
    path = home / ".kaggle" / "kaggle.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data if data is not None else {"username": "u", "key": "k"}))
    path.chmod(mode)
    return path


def test_env_vars_are_enough(tmp_path: Path) -> None:
    check_kaggle_credentials({"KAGGLE_USERNAME": "u", "KAGGLE_KEY": "k"}, tmp_path)


def test_kaggle_json_mode_600(tmp_path: Path) -> None:
    write_token(tmp_path)
    check_kaggle_credentials({}, tmp_path)


def test_missing_credentials_say_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(UserError) as info:
        check_kaggle_credentials({}, tmp_path)
    message = str(info.value)
    assert "\n" not in message and "kaggle.json" in message and "KAGGLE_USERNAME" in message


def test_group_readable_token_is_rejected(tmp_path: Path) -> None:
    path = write_token(tmp_path, mode=0o644)
    with pytest.raises(UserError, match=f"chmod 600 {path}"):
        check_kaggle_credentials({}, tmp_path)


def test_malformed_token(tmp_path: Path) -> None:
    write_token(tmp_path, data={"username": "u"})
    with pytest.raises(UserError, match="'username' and 'key'"):
        check_kaggle_credentials({}, tmp_path)
    (tmp_path / ".kaggle" / "kaggle.json").write_text("{oops")
    with pytest.raises(UserError, match="unreadable"):
        check_kaggle_credentials({}, tmp_path)


def test_kaggle_config_dir_wins(tmp_path: Path) -> None:
    write_token(tmp_path / "cfg", mode=0o600)
    with pytest.raises(UserError):
        check_kaggle_credentials({"KAGGLE_CONFIG_DIR": str(tmp_path / "nowhere")}, tmp_path / "cfg")
    check_kaggle_credentials({"KAGGLE_CONFIG_DIR": str(tmp_path / "cfg" / ".kaggle")}, tmp_path)


FAKE = """#!/bin/sh
# fake mlebench: behaviour chosen by FAKE_MLEBENCH
echo "$@" >> "$FAKE_LOG"
case "$FAKE_MLEBENCH" in
  ok) mkdir -p "$5/$3/prepared/public" "$5/$3/prepared/private"; \
      touch "$5/$3/prepared/public/description.md" "$5/$3/prepared/private/test.csv"; exit 0 ;;
  silent) exit 0 ;;
  rules) echo "kaggle.rest.ApiException: (403) You must accept this competition's rules"; \
         echo "EOFError: EOF when reading a line" >&2; exit 1 ;;
  offline) echo "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='api.kaggle.com'): \
Max retries exceeded (Caused by NameResolutionError)" >&2; exit 1 ;;
  other) echo "something odd happened" >&2; exit 3 ;;
esac
"""


@pytest.fixture
def fake_env(tmp_path: Path) -> dict[str, str]:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "mlebench"
    exe.write_text(FAKE)
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return {
        "PATH": f"{bindir}{os.pathsep}/usr/bin:/bin",
        "KAGGLE_USERNAME": "u",
        "KAGGLE_KEY": "k",
        "FAKE_LOG": str(tmp_path / "calls.log"),
    }


def test_prepare_runs_mlebench_per_task(tmp_path: Path, fake_env: dict[str, str]) -> None:
    env = {**fake_env, "FAKE_MLEBENCH": "ok"}
    outcomes = prepare_tasks(["a-comp", "b-comp", "a-comp"], tmp_path / "data", {}, env=env, home=tmp_path)
    assert [o.task for o in outcomes] == ["a-comp", "b-comp"]
    calls = Path(fake_env["FAKE_LOG"]).read_text().splitlines()
    assert calls == [f"prepare -c {t} --data-dir {tmp_path / 'data'}" for t in ("a-comp", "b-comp")]
    assert is_prepared(tmp_path / "data", "a-comp")


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("rules", "spooky: accept the rules at https://www.kaggle.com/c/spooky/rules, then rerun prepare"),
        ("offline", "spooky: no network to Kaggle"),
        ("other", "spooky: mlebench prepare failed: something odd happened"),
        ("silent", "spooky: mlebench prepare exited 0 but"),
    ],
)
def test_prepare_failures_are_one_line(
    tmp_path: Path, fake_env: dict[str, str], mode: str, expected: str
) -> None:
    with pytest.raises(UserError) as info:
        prepare_tasks(
            ["spooky"], tmp_path / "data", {}, env={**fake_env, "FAKE_MLEBENCH": mode}, home=tmp_path
        )
    assert str(info.value).startswith(expected) and "\n" not in str(info.value)


def test_missing_mlebench_executable(tmp_path: Path) -> None:
    env = {"PATH": str(tmp_path / "empty"), "KAGGLE_USERNAME": "u", "KAGGLE_KEY": "k"}
    with pytest.raises(UserError, match="^mlebench is not installed; run scripts/install_mlebench.sh$"):
        prepare_tasks(["spooky"], tmp_path / "data", {}, env=env, home=tmp_path)


def test_credentials_checked_before_anything_runs(tmp_path: Path, fake_env: dict[str, str]) -> None:
    env = {k: v for k, v in fake_env.items() if not k.startswith("KAGGLE")} | {"FAKE_MLEBENCH": "ok"}
    with pytest.raises(UserError, match="no Kaggle credentials"):
        prepare_tasks(["spooky"], tmp_path / "data", {}, env=env, home=tmp_path)
    assert not Path(fake_env["FAKE_LOG"]).exists()


def test_local_tasks_need_no_kaggle(tmp_path: Path, local_comps: dict[str, Path]) -> None:
    env = {"PATH": str(tmp_path / "empty")}  # no credentials, no mlebench
    outcomes = prepare_tasks(["iris-species"], tmp_path / "data", local_comps, env=env, home=tmp_path)
    assert outcomes[0].kind == "local" and is_prepared(tmp_path / "data", "iris-species")


def test_explain_kaggle_too_new() -> None:
    line = explain_prepare_failure("x", "ModuleNotFoundError: No module named 'kaggle.rest'")
    assert "kaggle>=1.6,<1.7" in line
