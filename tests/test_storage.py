"""Atomic writes: the data is fsynced before the rename, and the directory after it (the new name is
durable only then), for the records and for the graded file's link.

Writes real files under tmp_path; records the fsync and rename calls as they happen.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from mle_world.agent.sandbox.workspace import copy_atomic, link_atomic
from mle_world.storage import sync_directory, write_bytes_atomic


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """ "fsync file", "fsync dir" and "replace" in the order they happen."""
    seen: list[str] = []
    fsync, replace = os.fsync, os.replace

    def recording_fsync(fd: int) -> None:
        seen.append("fsync dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "fsync file")
        fsync(fd)

    def recording_replace(src: object, dst: object) -> None:
        seen.append("replace")
        replace(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "fsync", recording_fsync)
    monkeypatch.setattr(os, "replace", recording_replace)
    return seen


def test_a_durable_write_syncs_the_data_then_the_directory(tmp_path: Path, calls: list[str]) -> None:
    target = tmp_path / "status.json"
    write_bytes_atomic(target, b"{}\n")
    assert target.read_bytes() == b"{}\n"
    assert calls == ["fsync file", "replace", "fsync dir"]


def test_a_write_that_need_not_last_syncs_nothing(tmp_path: Path, calls: list[str]) -> None:
    write_bytes_atomic(tmp_path / "index.html", b"<p>", durable=False)
    assert calls == ["replace"]


def test_the_graded_files_link_and_copy_sync_their_directory(tmp_path: Path, calls: list[str]) -> None:
    staged = tmp_path / "staged.csv"
    staged.write_text("id,y\n1,2\n")
    graded = tmp_path / "submission" / "submission.csv"
    graded.parent.mkdir()
    link_atomic(staged, graded, durable=True)
    assert graded.read_text() == "id,y\n1,2\n" and os.path.samefile(staged, graded)
    assert calls == ["fsync file", "replace", "fsync dir"]
    calls.clear()
    copy_atomic(staged, tmp_path / "kept" / "copy.csv")
    assert calls == ["fsync file", "replace", "fsync dir"]
    calls.clear()
    link_atomic(staged, tmp_path / "kept" / "link.csv", durable=False)
    assert calls == ["replace"]


def test_syncing_a_directory_that_cannot_be_opened_is_no_error(tmp_path: Path) -> None:
    sync_directory(tmp_path / "missing")
    sync_directory(Path("/proc/self"))  # opens, and a pseudo file system may refuse the fsync


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_a_record_gets_the_mode_the_umask_gives_a_new_file(tmp_path: Path, umask: int) -> None:
    """As open() would: a group sharing the output dir reads status.json and the reports (mkstemp's
    0600 made them unreadable to all but their writer); a private umask keeps them private."""
    previous = os.umask(umask)
    try:
        write_bytes_atomic(tmp_path / "status.json", b"{}")
        (tmp_path / "plain.json").write_bytes(b"{}")
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "status.json").stat().st_mode) == 0o666 & ~umask
    assert stat.S_IMODE((tmp_path / "plain.json").stat().st_mode) == 0o666 & ~umask
    write_bytes_atomic(tmp_path / "page.html", b"x", 0o640)
    assert stat.S_IMODE((tmp_path / "page.html").stat().st_mode) == 0o640
