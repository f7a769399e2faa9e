"""The audit traces a table's reports to the MLE-bench that graded them, and names a mix of versions.

Reads hand-built sweeps (launch.json, grading reports); writes the audit's outputs under tmp paths.
"""

from __future__ import annotations

import json
from pathlib import Path

from auditkit import tid, write_launch, write_report

from mle_world.audit import run_audit

OLD = "1.0.0 (git 783b15af77404fbaffe7255b0c4a934b46153389)"
NEW = "1.0.0 (git 783b15af77404fbaffe7255b0c4a934b46153389 with local changes sha256 c9435cc10e19)"


def _graded(out: Path, task: str, seed: int, version: str | None) -> None:
    path = write_report(out, "gated", "aide", task, seed, score=0.5)
    data = json.loads(path.read_text())
    if version is None:
        del data["mlebench_version"]  # a report written before the version was recorded
    else:
        data["mlebench_version"] = version
    path.write_text(json.dumps(data))


def test_reports_graded_by_different_mlebench_versions_are_a_problem_and_provenance_names_them(
    tmp_path: Path,
) -> None:
    out = tmp_path / "g"
    write_launch(out, "gated", [tid("gated", "aide", t, 34) for t in ("A", "B", "C", "D")])
    launch = json.loads((out / "launch.json").read_text())
    (out / "launch.json").write_text(json.dumps({**launch, "mlebench_version": NEW}))
    _graded(out, "A", 34, OLD)
    _graded(out, "B", 34, NEW)
    _graded(out, "C", 34, NEW)
    _graded(out, "D", 34, None)
    assert run_audit([out], out_dir=tmp_path / "a", plots=False, trial_pages=False) == 0
    md = (tmp_path / "a" / "report.md").read_text()
    problem = f"reports graded by different MLE-bench versions: {NEW} (2 reports), {OLD} (1 report)"
    assert f"- dir: {problem}" in md
    # The launch's grading check ran NEW (a Slurm job grades on its compute node, maybe with another one).
    assert f"- dir: {out}: launched with MLE-bench {NEW}, but reports were graded by {OLD} (1 report)" in md
    provenance = md.split("## Completeness")[0]
    assert f"image none; MLE-bench {NEW}; launched" in provenance  # the latest launch's grading check
    assert f"MLE-bench {NEW}: 2, MLE-bench {OLD}: 1; built-in grader or not recorded: 1" in provenance
    assert run_audit([out], strict=True, out_dir=tmp_path / "a", plots=False, trial_pages=False) == 1

    # One version (and reports that record none): no problem, strict passes.
    _graded(out, "A", 34, NEW)
    assert run_audit([out], strict=True, out_dir=tmp_path / "a", plots=False, trial_pages=False) == 0
    md = (tmp_path / "a" / "report.md").read_text()
    assert "different MLE-bench versions" not in md and "but reports were graded by" not in md


def test_the_versions_of_dirs_audited_together_are_counted_together(tmp_path: Path) -> None:
    # Each dir graded by one version alone, the two dirs by two: one problem, the counts added up.
    first, second = tmp_path / "g1", tmp_path / "g2"
    write_launch(first, "gated", [tid("gated", "aide", t, 34) for t in ("A", "B")])
    write_launch(second, "gated", [tid("gated", "aide", t, 34) for t in ("C", "D", "E")])
    _graded(first, "A", 34, OLD)
    _graded(first, "B", 34, OLD)
    _graded(second, "C", 34, NEW)
    _graded(second, "D", 34, NEW)
    _graded(second, "E", 34, None)
    assert run_audit([first, second], out_dir=tmp_path / "a", plots=False, trial_pages=False) == 0
    md = (tmp_path / "a" / "report.md").read_text()
    # Two reports each: the versions in name order (NEW's " with local changes" sorts before OLD's ")").
    assert f"reports graded by different MLE-bench versions: {NEW} (2 reports), {OLD} (2 reports)" in md
    _graded(second, "E", 34, NEW)
    run_audit([first, second], out_dir=tmp_path / "a", plots=False, trial_pages=False)
    md = (tmp_path / "a" / "report.md").read_text()
    assert f"reports graded by different MLE-bench versions: {NEW} (3 reports), {OLD} (2 reports)" in md
    assert "but reports were graded by" not in md  # no launch recorded a grading check's version
