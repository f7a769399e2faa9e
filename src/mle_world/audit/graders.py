"""Which MLE-bench graded the reports an audit counts: one table's reports must share one grader.

Reads the counted grading reports' `mlebench_version` (passed in); writes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Protocol

from mle_world.audit.report_view import ReportView
from mle_world.records import LaunchProvenance


class Graded(Protocol):
    """A collected trial, as far as this module reads it."""

    @property
    def output_dir(self) -> Path: ...

    @property
    def report(self) -> ReportView | None: ...


def mlebench_versions(reports: Iterable[ReportView | None]) -> dict[str, int]:
    """Reports per MLE-bench version that graded them, most first (the built-in grader and older reports
    record none)."""
    counts: dict[str, int] = {}
    for report in reports:
        version = report.mlebench_version if report is not None else None
        if version is not None:
            counts[version] = counts.get(version, 0) + 1
    return _most_first(counts)


def _most_first(counts: dict[str, int]) -> dict[str, int]:
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


def graders_problems(trials: Iterable[Graded], launches: Mapping[Path, LaunchProvenance]) -> list[str]:
    """The audit's problems about graders: reports graded by different MLE-bench versions, and a dir whose
    reports were graded by another MLE-bench than its launch's grading check ran (a Slurm job grades on
    its compute node, whose MLE-bench may not be the one on the node that launched)."""
    by_dir: dict[Path, list[ReportView | None]] = {}
    for t in trials:  # grouped once: a comparison of Paths per trial and dir was 0.3 s at 100,000 reports
        by_dir.setdefault(t.output_dir, []).append(t.report)
    counted = {directory: mlebench_versions(reports) for directory, reports in by_dir.items()}
    overall: dict[str, int] = {}  # the dirs' counts added up: the reports are counted once
    for versions in counted.values():
        for version, count in versions.items():
            overall[version] = overall.get(version, 0) + count
    problems = []
    mixed = mixed_versions(_most_first(overall))
    if mixed is not None:
        problems.append(mixed)
    for directory, launch in launches.items():
        checked = launch.mlebench_version
        versions = counted.get(directory, {})
        others = {version: count for version, count in versions.items() if version != checked}
        if checked and others:
            graded = ", ".join(
                f"{version} ({count} report{'s' * (count > 1)})" for version, count in others.items()
            )
            problems.append(
                f"{directory}: launched with MLE-bench {checked}, but reports were graded by {graded}"
            )
    return problems
