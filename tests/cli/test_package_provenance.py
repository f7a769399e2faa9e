"""An installed copy of the harness (no git checkout) records a hash of its own files in launch.json,
so a resume after its code changed is seen as a change of code, as a new commit is."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import mle_world
from mle_world.cli.planning import package_sha256
from mle_world.identity import provenance_changes
from mle_world.records import LaunchProvenance


def test_the_package_hash_follows_its_files_and_not_its_bytecode(tmp_path: Path) -> None:
    copy = tmp_path / "mle_world"
    shutil.copytree(Path(mle_world.__file__).parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    before = package_sha256(copy)
    (copy / "__pycache__").mkdir(exist_ok=True)
    (copy / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    assert package_sha256(copy) == before
    grader = copy / "grading" / "medals.py"
    grader.write_text(grader.read_text() + "\n# edited\n")
    assert package_sha256(copy) != before


def test_a_changed_installed_copy_is_a_change_of_code() -> None:
    def launch(digest: str) -> LaunchProvenance:
        return LaunchProvenance(
            created_at=datetime(2026, 1, 1, tzinfo=UTC),
            harness_version="0.1.0",
            git_sha=None,
            package_sha256=digest,
        )

    assert provenance_changes(launch("a" * 64), launch("a" * 64)) == []
    assert provenance_changes(launch("a" * 64), launch("b" * 64)) == [
        f"code installed copy {'a' * 12} -> installed copy {'b' * 12}"
    ]
