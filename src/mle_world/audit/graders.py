"""Which MLE-bench graded the reports an audit counts: one table's reports must share one grader.

Reads the counted grading reports' `mlebench_version` (passed in); writes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

from mle_world.grading.report import GradingReport


def mlebench_versions(reports: Iterable[GradingReport | None]) -> dict[str, int]:
    """Reports per MLE-bench version that graded them, most first (the built-in grader and older reports
    record none)."""
    counts: dict[str, int] = {}
    for report in reports:
        version = report.mlebench_version if report is not None else None
        if version is not None:
            counts[version] = counts.get(version, 0) + 1
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def mixed_versions(versions: dict[str, int]) -> str | None:
    """The audit's problem when the reports were graded by more than one MLE-bench (a different commit, or
    local changes to its graders or leaderboards, can change scores, validity and medals), else None."""
    if len(versions) < 2:
        return None
    graded = ", ".join(
        f"{version} ({count} report{'s' * (count > 1)})" for version, count in versions.items()
    )
    return f"reports graded by different MLE-bench versions: {graded}"
