"""A resume graded by another MLE-bench than the sweep's earlier launches is a change of provenance.

Reads and writes launch.json under tmp paths (identity.check_provenance, as the CLI calls it).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from launchkit import make_plan

from mle_world.errors import UserError
from mle_world.identity import check_provenance
from mle_world.storage import write_model

A = "1.0.0 (git 783b15af77404fbaffe7255b0c4a934b46153389)"
B = "1.0.0 (git 783b15af77404fbaffe7255b0c4a934b46153389 with local changes sha256 c9435cc10e19)"


def test_a_resume_graded_by_another_mlebench_is_refused_even_after_a_launch_without_grade(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    first = make_plan(out, tmp_path / "data", 1).record.model_copy(update={"mlebench_version": A})
    path = out / "launch.json"
    write_model(path, first)
    assert check_provenance(path, first, allow=False) == []
    # A launch without --grade checks no grader: it records none, which is no change.
    ungraded = first.model_copy(update={"mlebench_version": None})
    assert check_provenance(path, ungraded, allow=False) == []
    with pytest.raises(UserError, match=f"MLE-bench {A} -> {B}".replace("(", r"\(").replace(")", r"\)")):
        check_provenance(path, first.model_copy(update={"mlebench_version": B}), allow=False)
    # After that ungraded launch (latest in launch.json), the earlier launch's MLE-bench still stands.
    write_model(path, ungraded.model_copy(update={"earlier_launches": (first.provenance(),)}))
    assert check_provenance(path, first.model_copy(update={"mlebench_version": B}), allow=True) == [
        f"MLE-bench {A} -> {B}"
    ]
