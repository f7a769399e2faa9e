"""scripts/install_mlebench.sh: the archive mode refuses bad input in one line, exit 2, before it installs;
the clone mode (users with GitHub) still clones, checks out, refuses LFS pointers and installs.

Runs the real script in subprocesses, on archives made here with `git archive` and on a local repository
(one test pip-installs that small package into a venv); writes only pytest's tmp paths.
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


def clone_source(tmp_path: Path, leaderboard: str) -> tuple[Path, str, dict[str, str]]:
    """A local git repository shaped like openai/mle-bench (importable `mlebench.grade`/`registry`), its
    commit, and a PATH with a no-op `git-lfs` (this machine has none; its files are not in LFS anyway)."""
    repo = tmp_path / "upstream"
    board = repo / "mlebench" / "competitions" / "spaceship-titanic" / "leaderboard.csv"
    board.parent.mkdir(parents=True)
    board.write_text(leaderboard)
    for name in ("__init__.py", "grade.py", "registry.py"):
        (repo / "mlebench" / name).write_text("")
    (repo / "pyproject.toml").write_text(
        "[project]\nname = 'mlebench'\nversion = '1.0.0'\n"
        "[tool.setuptools]\npackages = { find = { include = ['mlebench', 'mlebench.*'] } }\n"
    )
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "snapshot"], check=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout
    shim = tmp_path / "bin" / "git-lfs"
    shim.parent.mkdir()
    shim.write_text("#!/bin/sh\nexit 0\n")
    shim.chmod(0o755)
    return repo, commit.strip(), {"PATH": f"{shim.parent}:{os.environ['PATH']}"}


def test_the_clone_mode_refuses_leaderboards_left_as_lfs_pointers(tmp_path: Path) -> None:
    repo, commit, path = clone_source(tmp_path, "version https://git-lfs.github.com/spec/v1\noid sha256:0\n")
    checkout = tmp_path / "checkout"
    done = run({**path, "MLEBENCH_REPO": str(repo), "MLEBENCH_COMMIT": commit, "MLEBENCH_DIR": str(checkout)})
    assert (done.returncode, done.stderr) == (
        1,
        f"install_mlebench: leaderboards are still git-lfs pointers; run 'git lfs pull' in {checkout}\n",
    )


def test_the_clone_mode_installs_the_pinned_commit_into_a_venv(tmp_path: Path) -> None:
    """The path for users with GitHub, against a local repository: clone, checkout, pip install -e."""
    repo, commit, path = clone_source(tmp_path, "teamId,score\n1,0.9\n")
    checkout, venv = tmp_path / "checkout", tmp_path / "venv"
    env = {**path, "MLEBENCH_REPO": str(repo), "MLEBENCH_COMMIT": commit[:7], "MLEBENCH_DIR": str(checkout)}
    done = run({**env, "MLEBENCH_VENV": str(venv)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == [
        f"mlebench {commit} installed from {checkout} into {venv} (dependencies: all)",
        f"export MLEBENCH_VENV={venv}   # so run_paper.py prepare uses {venv}/bin/mlebench",
    ]
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import mlebench; print(mlebench.__file__)"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    )
    assert where.stdout.strip() == str(checkout / "mlebench" / "__init__.py")  # editable: the checkout itself
