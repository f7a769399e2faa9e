"""`mlebench_version.describe` of an MLE-bench unpacked from a `git archive` (install_mlebench.sh's
MLEBENCH_ARCHIVE): the commit from its `.git_archival.txt`. Writes package trees under pytest's tmp paths.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mle_world.grading.mlebench_version import describe

COMMIT = "783b15af77404fbaffe7255b0c4a934b46153389"


def unpacked(tmp_path: Path, archival: str | None) -> str:
    """An unpacked tree (no git) with `mlebench/__init__.py`, and `.git_archival.txt` holding `archival`."""
    (tmp_path / "tree" / "mlebench").mkdir(parents=True)
    init = tmp_path / "tree" / "mlebench" / "__init__.py"
    init.write_text("")
    if archival is not None:
        (tmp_path / "tree" / ".git_archival.txt").write_text(archival)
    return str(init)


def test_an_archive_install_is_described_by_its_commit(tmp_path: Path) -> None:
    init = unpacked(tmp_path, f"node: {COMMIT}\n")
    assert describe({"version": "1.0.0", "direct_url": None, "file": init}) == (
        f"1.0.0 (git {COMMIT} from a git archive)"
    )


@pytest.mark.parametrize(
    "archival",
    [None, "node: $Format:%H$\n", "node: 783b15a\n", f"node: {COMMIT}; rm -rf /\n", ""],
    ids=["absent", "unfilled", "short", "trailing", "empty"],
)
def test_no_commit_without_a_full_one_in_git_archival(tmp_path: Path, archival: str | None) -> None:
    init = unpacked(tmp_path, archival)
    assert describe({"version": "1.0.0", "direct_url": None, "file": init}) == "1.0.0"


def test_a_fifo_for_git_archival_is_not_waited_on(tmp_path: Path) -> None:
    init = unpacked(tmp_path, None)
    os.mkfifo(tmp_path / "tree" / ".git_archival.txt")  # open() would block until a writer came
    assert describe({"version": "1.0.0", "direct_url": None, "file": init}) == "1.0.0"
