"""Layout of the trial directory and the scratch workspace where generated scripts run.

Reads the public data dir; writes the workspace (a read-only mirror of the data as `input/`).
"""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TrialLayout:
    """Every path the agent writes, derived from the trial dir (see the spec's contract)."""

    trial_dir: Path
    data_dir: Path

    @property
    def journal(self) -> Path:
        return self.trial_dir / "journal.json"

    @property
    def events(self) -> Path:
        return self.trial_dir / "events.jsonl"

    @property
    def result(self) -> Path:
        return self.trial_dir / "result.json"

    @property
    def best_solution(self) -> Path:
        return self.trial_dir / "best_solution.py"

    @property
    def submission_csv(self) -> Path:
        return self.trial_dir / "submission" / "submission.csv"

    @property
    def logs(self) -> Path:
        return self.trial_dir / "logs"

    @property
    def node_logs(self) -> Path:
        return self.logs / "nodes"

    @property
    def workspace(self) -> Path:
        return self.trial_dir / "workspace"

    @property
    def input(self) -> Path:
        return self.workspace / "input"

    @property
    def run_submission_dir(self) -> Path:
        return self.workspace / "submission"

    @property
    def run_submission_csv(self) -> Path:
        return self.run_submission_dir / "submission.csv"

    @property
    def working(self) -> Path:
        return self.workspace / "working"

    @property
    def tmp(self) -> Path:
        return self.workspace / "tmp"


def _make_writable(root: Path) -> None:
    for dirpath, dirnames, _ in os.walk(root):
        os.chmod(dirpath, stat.S_IRWXU)
        for name in dirnames:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                os.chmod(path, stat.S_IRWXU)


def build_data_view(data_dir: Path, view: Path) -> None:
    """Mirror `data_dir` as real directories holding symlinks to its files, then make it read-only.

    A single symlink to the data dir would let `input/../private` reach the sibling answers
    when the data is not mounted alone (the `process` runtime): `..` of a directory symlink
    resolves in the target. File symlinks have no such walk-up, and mirrored directories'
    `..` stays inside the workspace.
    """
    if view.is_symlink() or view.is_file():
        view.unlink()
    elif view.exists():
        _make_writable(view)
        shutil.rmtree(view)
    source_root = data_dir.resolve()
    for dirpath, dirnames, filenames in os.walk(source_root, followlinks=True):
        rel = Path(dirpath).relative_to(source_root)
        target_dir = view / rel
        target_dir.mkdir(parents=True, exist_ok=True)
        for name in filenames:
            os.symlink(Path(dirpath, name).resolve(), target_dir / name)
        dirnames.sort()
    for dirpath, _, _ in os.walk(view, topdown=False):
        os.chmod(dirpath, stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP)


def prepare(layout: TrialLayout) -> None:
    """Create the trial's directories and a fresh data view (idempotent, also on resume)."""
    for path in (layout.logs, layout.node_logs, layout.workspace, layout.working, layout.tmp):
        path.mkdir(parents=True, exist_ok=True)
    layout.submission_csv.parent.mkdir(parents=True, exist_ok=True)
    build_data_view(layout.data_dir, layout.input)
    reset_run_submission(layout)


def reset_run_submission(layout: TrialLayout) -> None:
    """An empty `submission/` before each run, so a stale file never passes the submission check."""
    if layout.run_submission_dir.exists():
        shutil.rmtree(layout.run_submission_dir)
    layout.run_submission_dir.mkdir(parents=True)


def copy_atomic(source: Path, target: Path) -> None:
    """Copy into a temp file beside `target`, then rename: the graded file is never half-written."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    shutil.copyfile(source, tmp)
    with open(tmp, "rb") as handle:
        os.fsync(handle.fileno())
    os.replace(tmp, target)
