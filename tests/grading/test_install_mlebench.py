"""scripts/install_mlebench.sh's archive mode refuses bad input in one line, exit 2, before it installs.

Runs the real script in subprocesses on archives made here with `git archive`; writes only pytest's tmp
paths (and never reaches pip: every case is refused first).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "install_mlebench.sh"


def git_archive(tmp_path: Path) -> tuple[Path, str]:
    """A .tar.gz made by `git archive` of a one-commit repository (not MLE-bench), and its commit."""
    repo = tmp_path / "repo"
    (repo / "mlebench").mkdir(parents=True)
    (repo / "pyproject.toml").write_text("[project]\nname = 'mlebench'\n")
    (repo / "mlebench" / "__init__.py").write_text("")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "snapshot"], check=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout
    archive = tmp_path / "snapshot.tar.gz"
    subprocess.run([*git, "archive", "--prefix=snap/", "-o", str(archive), "HEAD"], check=True)
    return archive, commit.strip()


def run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("MLEBENCH_")}
    return subprocess.run(
        ["bash", str(SCRIPT)], env={**base, **env}, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize(
    "case", ["no-venv", "no-archive", "not-git-archive", "other-commit", "dir-not-empty"]
)
def test_archive_mode_refuses_bad_input_in_one_line(tmp_path: Path, case: str) -> None:
    archive, commit = git_archive(tmp_path)
    target, venv = tmp_path / "unpacked", tmp_path / "venv"
    env = {
        "MLEBENCH_ARCHIVE": str(archive),
        "MLEBENCH_COMMIT": commit[:7],
        "MLEBENCH_DIR": str(target),
        "MLEBENCH_VENV": str(venv),
    }
    if case == "no-venv":
        del env["MLEBENCH_VENV"]
        expected = (
            "MLEBENCH_ARCHIVE needs MLEBENCH_VENV (MLE-bench pins kaggle<1.7: keep it in a venv of its own)"
        )
    elif case == "no-archive":
        env["MLEBENCH_ARCHIVE"] = str(tmp_path / "absent.tar.gz")
        expected = f"MLEBENCH_ARCHIVE={tmp_path / 'absent.tar.gz'}: no such file"
    elif case == "not-git-archive":
        plain = tmp_path / "plain.tar.gz"
        subprocess.run(["tar", "-czf", str(plain), "-C", str(tmp_path), "repo/pyproject.toml"], check=True)
        env["MLEBENCH_ARCHIVE"] = str(plain)
        expected = f"MLEBENCH_ARCHIVE={plain}: not a .tar.gz made by git archive (no commit in its header)"
    elif case == "other-commit":
        env["MLEBENCH_COMMIT"] = "783b15a"  # the pinned default: this archive is not MLE-bench's
        expected = f"MLEBENCH_ARCHIVE={archive} is a snapshot of {commit}, not of MLEBENCH_COMMIT=783b15a"
    else:
        (target / "mine").mkdir(parents=True)  # someone's directory: never unpacked over
        expected = f"MLEBENCH_DIR={target} is not empty: unpack the archive into a new directory"
    done = run(env)
    assert (done.returncode, done.stderr, done.stdout) == (2, f"install_mlebench: {expected}\n", "")
    assert not venv.exists()
    assert case == "dir-not-empty" or not target.exists()
    assert case != "dir-not-empty" or [p.name for p in target.iterdir()] == ["mine"]


def test_a_bad_deps_choice_is_refused_in_one_line(tmp_path: Path) -> None:
    done = run({"MLEBENCH_DEPS": "some", "MLEBENCH_DIR": str(tmp_path / "x")})
    assert (done.returncode, done.stderr) == (
        2,
        "install_mlebench: MLEBENCH_DEPS=some: expected all or grading\n",
    )
    assert not (tmp_path / "x").exists()
