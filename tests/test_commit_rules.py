"""The commit-message rule of CONTRIBUTING.md, as CI and the commit-msg hook check it.

Runs scripts/check_commit_subjects.sh and scripts/hooks/commit-msg on throwaway repositories and
message files in tmp dirs; writes nothing else.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHECK = REPO / "scripts" / "check_commit_subjects.sh"
HOOK = REPO / "scripts" / "hooks" / "commit-msg"
GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
}


def _repo_with(tmp_path: Path, messages: list[str]) -> Path:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=GIT_ENV)
    for i, message in enumerate(messages):
        (repo / "f").write_text(str(i))
        subprocess.run(["git", "add", "f"], cwd=repo, check=True, env=GIT_ENV)
        subprocess.run(
            ["git", "commit", "-q", "-F", "-"], input=message, text=True, cwd=repo, check=True, env=GIT_ENV
        )
    return repo


def test_the_check_names_a_long_subject_and_a_missing_blank_line(tmp_path: Path) -> None:
    long = "x" * 73
    repo = _repo_with(tmp_path, ["root", "ok: fine\n\nwhy it was needed", long, "glued\nbody right below"])
    proc = subprocess.run(["bash", str(CHECK), "HEAD~3..HEAD"], cwd=repo, capture_output=True, text=True)
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert len(lines) == 2, proc.stdout
    assert "subject is 73 characters (at most 72)" in lines[1]
    assert "no blank line between the subject and the body" in lines[0]


def test_the_check_passes_conforming_commits(tmp_path: Path) -> None:
    repo = _repo_with(tmp_path, ["root", "a: " + "y" * 69, "b: short\n\nbody\n\nmore body"])
    proc = subprocess.run(["bash", str(CHECK), "HEAD~2..HEAD"], cwd=repo, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_this_repository_keeps_the_rule() -> None:
    proc = subprocess.run(["bash", str(CHECK)], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


def test_the_hook_refuses_what_the_check_refuses(tmp_path: Path) -> None:
    message = tmp_path / "MSG"
    for text, code in (
        ("short subject\n\nbody\n# a comment git strips\n", 0),
        ("z" * 80 + "\n", 1),
        ("subject\nbody without a blank line\n", 1),
    ):
        message.write_text(text)
        proc = subprocess.run(["bash", str(HOOK), str(message)], capture_output=True, text=True)
        assert proc.returncode == code, (text, proc.stderr)
