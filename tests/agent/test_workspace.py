"""The run's submission dir emptied before each run and the staged submission linked out, on real files.

Reads nothing; writes trial dirs under tmp_path (and one file under /dev/shm for the copy fallback).
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import pytest

from mle_world.agent.sandbox.workspace import (
    RUN_DIR_MODE,
    TrialLayout,
    empty_dir,
    link_atomic,
    reset_run_submission,
    set_up_trial_dir,
    stage_submission,
)


def _layout(tmp_path: Path) -> TrialLayout:
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.csv").write_text("id,y\n1,2\n")
    layout = TrialLayout(tmp_path / "trial", data)
    set_up_trial_dir(layout)
    return layout


def test_tmp_is_made_empty_whatever_a_run_left_there_or_in_it(tmp_path: Path) -> None:
    """tmp/ (each run's /tmp, where the sandbox makes mount points) is emptied in place, its links,
    FIFOs and locked-up trees removed and never followed; a link, FIFO or file in its place is
    replaced by a real directory."""
    layout = _layout(tmp_path)
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "sub" / "keep").write_text("precious")
    tmp = layout.tmp
    os.symlink(outside, tmp / "dirlink")
    os.symlink(tmp / "loop", tmp / "loop")
    os.mkfifo(tmp / "fifo")
    (tmp / "a" / "b").mkdir(parents=True)
    os.symlink(outside / "sub", tmp / "a" / "b" / "venv")
    os.chmod(tmp / "a", 0)
    os.chmod(tmp, 0o1700)
    empty_dir(tmp)
    assert list(tmp.iterdir()) == [] and stat.S_IMODE(tmp.lstat().st_mode) == RUN_DIR_MODE
    for planted in ("link", "fifo", "file"):
        os.rmdir(tmp)
        {"link": lambda: os.symlink(outside, tmp), "fifo": lambda: os.mkfifo(tmp)}.get(
            planted, lambda: tmp.write_text("x")
        )()
        empty_dir(tmp)
        assert stat.S_ISDIR(tmp.lstat().st_mode) and list(tmp.iterdir()) == [], planted
    os.rmdir(tmp)
    empty_dir(tmp)  # removed by the run
    assert tmp.is_dir() and (outside / "sub" / "keep").read_text() == "precious"


def _run_writes(layout: TrialLayout, text: str) -> None:
    """What a run leaves: its submission.csv (the dir exists: the agent made it before the run)."""
    layout.run_submission_csv.write_text(text)


def test_reset_empties_what_a_run_left_without_following_links(tmp_path: Path) -> None:
    layout = _layout(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.csv").write_text("precious")
    sub = layout.run_submission_dir

    # The usual case: files (and a link to a file outside) directly in submission/, its mode changed.
    _run_writes(layout, "id,y\n1,0\n")
    os.symlink(outside / "keep.csv", sub / "link.csv")
    os.chmod(sub, 0o3777)
    reset_run_submission(layout)
    assert sub.is_dir() and not sub.is_symlink() and list(sub.iterdir()) == []
    assert stat.S_IMODE(sub.stat().st_mode) == RUN_DIR_MODE

    # A nested tree with a read-only directory in it.
    (sub / "deep" / "er").mkdir(parents=True)
    (sub / "deep" / "er" / "x.csv").write_text("x")
    os.symlink(outside, sub / "deep" / "dirlink")
    os.chmod(sub / "deep", 0o555)
    reset_run_submission(layout)
    assert list(sub.iterdir()) == [] and stat.S_IMODE(sub.stat().st_mode) == RUN_DIR_MODE

    # submission/ itself replaced by a link to a directory outside.
    sub.rmdir()
    os.symlink(outside, sub)
    reset_run_submission(layout)
    assert sub.is_dir() and not sub.is_symlink() and list(sub.iterdir()) == []
    assert (outside / "keep.csv").read_text() == "precious" and sorted(os.listdir(outside)) == ["keep.csv"]


def test_a_linked_copy_keeps_its_run_when_later_runs_are_staged(tmp_path: Path) -> None:
    layout = _layout(tmp_path)
    kept = layout.node_logs / "first.submission.csv"
    _run_writes(layout, "id,y\n1,first\n")
    assert stage_submission(layout) is not None
    link_atomic(layout.staged_submission, kept, durable=False)
    link_atomic(layout.staged_submission, layout.submission_csv, durable=True)
    for text in ("id,y\n1,second\n", "id,y\n1,third\n"):
        reset_run_submission(layout)  # also drops the staged copy
        assert not layout.staged_submission.exists()
        _run_writes(layout, text)
        assert stage_submission(layout) is not None
    assert layout.staged_submission.read_text() == "id,y\n1,third\n"
    assert kept.read_text() == layout.submission_csv.read_text() == "id,y\n1,first\n"
    link_atomic(layout.staged_submission, kept, durable=True)  # replacing an existing target
    assert kept.read_text() == "id,y\n1,third\n" and layout.submission_csv.read_text() == "id,y\n1,first\n"
    assert not any(p.name.endswith(".tmp") for p in layout.node_logs.iterdir())


def test_link_across_file_systems_falls_back_to_a_copy(tmp_path: Path) -> None:
    shm = Path("/dev/shm")
    if not shm.is_dir() or not os.access(shm, os.W_OK) or shm.stat().st_dev == tmp_path.stat().st_dev:
        pytest.skip("needs /dev/shm on another file system")
    with tempfile.NamedTemporaryFile("w", dir=shm, suffix=".csv") as source:
        source.write("id,y\n1,shm\n")
        source.flush()
        target = tmp_path / "submission.csv"
        link_atomic(Path(source.name), target, durable=True)
        assert target.read_text() == "id,y\n1,shm\n"
        assert target.stat().st_ino != os.stat(source.name).st_ino


def test_reset_removes_a_tree_nested_past_path_max_and_the_recursion_limit(tmp_path: Path) -> None:
    # A run can nest directories (opened relative to each other) deeper than any path can name and
    # than a recursive walk goes, make some unreadable and link outside: the reset removes all of it,
    # follows no link, and the next run finds an empty submission/.
    layout = _layout(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("not the script's")
    fd = os.open(layout.run_submission_dir, os.O_RDONLY)
    for level in range(3000):
        name = "d" * 200 if level % 100 == 0 else "d"
        os.mkdir(name, dir_fd=fd)
        child = os.open(name, os.O_RDONLY, dir_fd=fd)
        os.symlink(outside, "out", dir_fd=fd)
        if level % 500 == 1:
            os.chmod(name, 0, dir_fd=fd)  # unreadable, unwritable
        os.close(fd)
        fd = child
    os.close(os.open("last.csv", os.O_WRONLY | os.O_CREAT, 0o444, dir_fd=fd))
    os.close(fd)
    reset_run_submission(layout)  # (else pytest's own clean-up would fail on it: it recurses)
    assert list(layout.run_submission_dir.iterdir()) == []
    assert (outside / "keep.txt").read_text() == "not the script's"


def test_a_resume_rebuilds_the_read_only_data_view_without_following_what_replaced_it(tmp_path: Path) -> None:
    layout = _layout(tmp_path)
    assert (layout.input / "train.csv").read_text() == "id,y\n1,2\n"
    assert stat.S_IMODE(layout.input.stat().st_mode) == 0o555
    set_up_trial_dir(layout)  # a resume: the read-only view is removed and built again
    assert sorted(p.name for p in layout.input.iterdir()) == ["train.csv"]
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.csv").write_text("precious")
    for path in sorted(layout.input.rglob("*"), reverse=True):
        path.unlink()
    layout.input.rmdir()
    os.symlink(outside, layout.input)  # what an unsandboxed script could leave in its place
    set_up_trial_dir(layout)
    assert (outside / "keep.csv").read_text() == "precious"
    assert not layout.input.is_symlink() and sorted(p.name for p in layout.input.iterdir()) == ["train.csv"]
