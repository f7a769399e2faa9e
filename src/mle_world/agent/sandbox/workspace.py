"""Layout of the trial directory and the scratch workspace where generated scripts run.

Reads the public data dir and a run's submission (never following a link a script left); writes the
workspace (a read-only mirror of the data as `input/`) and the staged copy of a run's submission.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from mle_world.layout import SUBMISSION_CSV, SUBMISSION_DIR, TrialFiles
from mle_world.storage import sync_directory

DATA_VIEW = "input"
"""The workspace's read-only view of the task's public data."""
SCRATCH = "tmp"
"""The workspace's scratch dir: a run's /tmp and /dev/shm, made empty by the agent before every run."""


@dataclass(frozen=True)
class TrialLayout:
    """Every path the agent writes, derived from the trial dir: `layout.TrialFiles` and a run's workspace."""

    trial_dir: Path
    data_dir: Path

    @cached_property
    def files(self) -> TrialFiles:
        return TrialFiles(self.trial_dir)

    @property
    def journal(self) -> Path:
        return self.files.journal

    @property
    def journal_lock(self) -> Path:
        """flock'ed by the live agent for its whole life: a second agent refuses to resume."""
        return self.files.journal_lock

    @property
    def events(self) -> Path:
        return self.files.events

    @property
    def result(self) -> Path:
        return self.files.result

    @property
    def best_solution(self) -> Path:
        return self.files.best_solution

    @property
    def submission_csv(self) -> Path:
        return self.files.submission

    @property
    def logs(self) -> Path:
        return self.files.logs

    @property
    def node_logs(self) -> Path:
        return self.files.node_logs

    @property
    def staged_submission(self) -> Path:
        """The last run's submission as the agent copied it out of the workspace."""
        return self.files.staged_submission

    @property
    def workspace(self) -> Path:
        return self.files.workspace

    @property
    def input(self) -> Path:
        return self.workspace / DATA_VIEW

    @property
    def run_submission_dir(self) -> Path:
        return self.workspace / SUBMISSION_DIR

    @property
    def run_submission_csv(self) -> Path:
        return self.run_submission_dir / SUBMISSION_CSV

    @property
    def working(self) -> Path:
        return self.workspace / "working"

    @property
    def tmp(self) -> Path:
        return self.workspace / SCRATCH


def build_data_view(data_dir: Path, view: Path) -> None:
    """Mirror `data_dir` as real directories holding symlinks to its files, then make it read-only.

    A single symlink to the data dir would let `input/../private` reach the sibling answers
    when the data is not mounted alone (the `process` runtime): `..` of a directory symlink
    resolves in the target. File symlinks have no such walk-up, and mirrored directories'
    `..` stays inside the workspace.
    """
    remove_entry(view)  # read-only dirs made writable first; a link or file left there is not followed
    source_root = data_dir.resolve()
    for dirpath, dirnames, filenames in os.walk(source_root, followlinks=True):
        rel = Path(dirpath).relative_to(source_root)
        target_dir = view / rel
        target_dir.mkdir(parents=True, exist_ok=True)
        for name in filenames:
            os.symlink(Path(dirpath, name).resolve(), target_dir / name)
        dirnames.sort()
    # Readable by the sandboxed script's uid too; writable by nobody.
    for dirpath, _, _ in os.walk(view, topdown=False):
        os.chmod(dirpath, 0o555)


def set_up_trial_dir(layout: TrialLayout) -> None:
    """Create the trial's directories and a fresh data view (idempotent, also on resume)."""
    for path in (layout.logs, layout.node_logs, layout.workspace):
        path.mkdir(parents=True, exist_ok=True)
    restore_dirs((layout.working,))
    empty_dir(layout.tmp)
    layout.submission_csv.parent.mkdir(parents=True, exist_ok=True)
    build_data_view(layout.data_dir, layout.input)
    reset_run_submission(layout)


def restore_dirs(paths: Sequence[Path]) -> None:
    """Make each path a real directory again, keeping what it holds: a script may have removed it or
    left a link, file or FIFO in its place, which is removed, never followed. Before every run (with
    no script alive), for `working/` and `submission/`; `tmp/`, which the sandbox binds, is emptied
    (`empty_dir`): bubblewrap follows a link it is given."""
    for path in paths:
        try:
            if stat.S_ISDIR(os.lstat(path).st_mode):
                continue
            remove_entry(path)
        except FileNotFoundError:
            pass
        os.mkdir(path, RUN_DIR_MODE)


def empty_dir(path: Path) -> None:
    """Make `path` an empty real directory of mode 0755, whatever a script left there or in it (links,
    FIFOs, files, trees nested past PATH_MAX), which is removed, never followed. Before every run, with
    no script alive: `tmp/` is bound on the run's /tmp, and bubblewrap, with the agent's privileges,
    makes the mount points of the paths it shows under /tmp inside it, following any link it meets
    there (docs/threat-model.md)."""
    try:
        fd = os.open(path, DIR_FLAGS)
    except OSError:  # missing, a link, file or FIFO in its place, or a directory the agent cannot open
        remove_entry(path)
        os.mkdir(path, RUN_DIR_MODE)
        return
    try:
        os.fchmod(fd, stat.S_IRWXU)
        for name in _unlink_files(fd):
            _remove_tree(fd, name)
        os.fchmod(fd, RUN_DIR_MODE)
    finally:
        os.close(fd)


def remove_entry(path: Path) -> None:
    """Remove a file, link or directory tree a script may have left, never following a link."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(info.st_mode):
        os.unlink(path)
        return
    parent = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # the agent's own
    try:
        _remove_tree(parent, path.name)
    finally:
        os.close(parent)


DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
"""Opening a directory a script may have made: never through a link it left."""
HOIST_DEPTH = 32
"""Directories nested deeper than this under a tree being removed are first moved up into its top."""


def _open_dir(parent: int, name: str) -> int:
    """Open a directory the (dead) script made, made searchable and writable by the agent first."""
    try:
        fd = os.open(name, DIR_FLAGS, dir_fd=parent)
    except PermissionError:
        os.chmod(name, stat.S_IRWXU, dir_fd=parent)  # a directory (listed so), its writers all dead
        fd = os.open(name, DIR_FLAGS, dir_fd=parent)
    with contextlib.suppress(OSError):
        os.fchmod(fd, stat.S_IRWXU)
    return fd


def _unlink_files(fd: int) -> list[str]:
    """Unlink every entry of the directory `fd` but its subdirectories, whose names are returned."""
    subdirs: list[str] = []
    with os.scandir(fd) as scan:
        for entry in scan:
            if entry.is_dir(follow_symlinks=False):
                subdirs.append(entry.name)
            else:
                os.unlink(entry.name, dir_fd=fd)
    return subdirs


def _remove_tree(parent: int, name: str) -> None:
    """Remove the directory `name` of `parent` with everything below it, through descriptors and names
    relative to them, without recursion: a script can nest directories past PATH_MAX (where paths
    fail), Python's recursion limit and the descriptors one process may open. Below HOIST_DEPTH a
    subdirectory is renamed into the top directory and removed from there."""
    top = _open_dir(parent, name)
    frames: list[tuple[int, str, list[str]]] = [(top, name, _unlink_files(top))]
    hoisted = 0
    try:
        while frames:
            fd, here, pending = frames[-1]
            if not pending:
                frames.pop()
                os.close(fd)
                os.rmdir(here, dir_fd=frames[-1][0] if frames else parent)
                continue
            child = pending.pop()
            if len(frames) < HOIST_DEPTH:
                child_fd = _open_dir(fd, child)
                frames.append((child_fd, child, _unlink_files(child_fd)))
                continue
            with contextlib.suppress(OSError):
                os.chmod(child, stat.S_IRWXU, dir_fd=fd)  # moving a directory rewrites its `..`
            while True:
                hoisted += 1
                moved = f".hoisted-{hoisted}"
                try:
                    os.lstat(moved, dir_fd=top)
                except FileNotFoundError:
                    break
            os.rename(child, moved, src_dir_fd=fd, dst_dir_fd=top)
            frames[0][2].append(moved)
    finally:
        for fd, _, _ in frames:
            os.close(fd)


RUN_DIR_MODE = 0o755
"""Mode of the run's `submission/` at the start of every run, whatever the last script set."""


def reset_run_submission(layout: TrialLayout) -> None:
    """An empty `submission/` before each run, so a stale file never passes the submission check."""
    path = layout.run_submission_dir
    remove_entry(path)
    path.mkdir(parents=True)
    os.chmod(path, RUN_DIR_MODE)
    with contextlib.suppress(FileNotFoundError):
        layout.staged_submission.unlink()


def stage_submission(layout: TrialLayout) -> str | None:
    """Copy the run's `submission/submission.csv` out of the workspace; return its sha256.

    The script owns the workspace, so every step is opened relative to a directory descriptor with
    O_NOFOLLOW: a link (to the graded file, the journal, /proc/self/environ) or a FIFO is refused,
    never read. An empty or missing file means no submission, and so does a sparse one (`_has_hole`).
    Not fsynced: most staged copies are never used, and `link_atomic(durable=True)` syncs the one that
    becomes the graded file.

    What the script left that cannot be read is no submission; a failing write of the agent's own copy
    (a full or failing disk) raises OSError: the infrastructure's failure, not a buggy node.
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    fds: list[int] = []
    try:
        try:
            fds.append(os.open(layout.workspace, flags | os.O_DIRECTORY))
            fds.append(os.open(SUBMISSION_DIR, flags | os.O_DIRECTORY, dir_fd=fds[-1]))
            fds.append(os.open(SUBMISSION_CSV, flags | os.O_NONBLOCK, dir_fd=fds[-1]))
            info = os.fstat(fds[-1])
            if not stat.S_ISREG(info.st_mode) or info.st_size == 0 or _has_hole(fds[-1], info.st_size):
                return None
        except OSError:
            return None
        return _copy_out(fds[-1], layout.staged_submission)
    finally:
        for fd in fds:
            os.close(fd)


def _copy_out(source_fd: int, staged: Path) -> str | None:
    """The script's open file copied to `staged` (atomically); its sha256, None when reading it failed."""
    digest = hashlib.sha256()
    staged.parent.mkdir(parents=True, exist_ok=True)
    tmp = staged.with_name(f".{staged.name}.tmp")
    try:
        with open(source_fd, "rb", closefd=False) as source, open(tmp, "wb") as target:
            while True:
                try:
                    chunk = source.read(1 << 20)
                except OSError:
                    return None  # the script's file: unreadable is no submission
                if not chunk:
                    break
                digest.update(chunk)
                target.write(chunk)
        os.replace(tmp, staged)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return digest.hexdigest()


def _has_hole(fd: int, size: int) -> bool:
    """Whether the file has a hole (a range never written, e.g. a truncate past its end). The disk
    limit counts allocated blocks, so such a file costs the workspace nothing, but every copy the agent
    made of it cost its full length outside the workspace: a CSV written as text has none."""
    try:
        hole = os.lseek(fd, 0, os.SEEK_HOLE)  # the file's length where the file system cannot tell
    except OSError:
        return False
    finally:
        os.lseek(fd, 0, os.SEEK_SET)
    return hole < size


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def link_atomic(source: Path, target: Path, *, durable: bool) -> None:
    """Make `target` the same file as `source` (a hard link renamed into place), else `copy_atomic`.

    For the agent's staged copies only: they are replaced by rename, never rewritten in place, so
    later runs never change what `target` holds. `durable`: the data is fsynced first (a machine
    crash cannot leave `target` named but empty); without it only a kill is survived.
    """
    if durable:
        fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    tmp = target.with_name(f".{target.name}.tmp")
    try:
        tmp.unlink(missing_ok=True)
        os.link(source, tmp, follow_symlinks=False)
    except OSError:  # no hard links here (another file system, a file system without them)
        copy_atomic(source, target)
        return
    os.replace(tmp, target)
    if durable:
        sync_directory(target.parent)


def copy_atomic(source: Path, target: Path) -> None:
    """Copy into a temp file beside `target`, then rename: the graded file is never half-written."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    shutil.copyfile(source, tmp)
    with open(tmp, "rb") as handle:
        os.fsync(handle.fileno())
    os.replace(tmp, target)
    sync_directory(target.parent)
