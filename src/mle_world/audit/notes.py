"""The audit's one-line notes beside its tables: endpoint downtime, each input dir's provenance, problems.

Reads a collected sweep; writes plain strings, which quote what endpoints and scripts said (served model
ids, causes): report.md, the terminal and index.html each escape them their own way.
"""

from __future__ import annotations

from mle_world.audit.collect import Sweep
from mle_world.audit.graders import mlebench_versions


def downtime_line(sweep: Sweep) -> str | None:
    """How much endpoint downtime the trials rode out (not counted in their budgets), or None."""
    rode_out = [t for t in sweep.trials if t.downtime_s > 0]
    if not rode_out:
        return None
    total = sum(t.downtime_s for t in rode_out)
    longest = max(rode_out, key=lambda t: t.downtime_s)
    return (
        f"endpoint downtime: {len(rode_out)} trial(s) rode out outages, {total:.0f} s in total (not counted "
        f"in their budgets); longest {longest.downtime_s:.0f} s in {longest.trial_id}"
    )


def provenance_lines(sweep: Sweep) -> list[str]:
    """One line per input dir: what its latest launch ran (launch.json), so a table's numbers can be
    traced to code, served models, image and MLE-bench; then which MLE-bench graded the counted reports."""
    lines = []
    for directory, p in sweep.provenance.items():
        code = p.git_sha[:12] if p.git_sha else "not a git checkout"
        if p.git_dirty:
            code += f" with uncommitted changes (sha256 {(p.git_diff_sha256 or '')[:12]})"
        models = ", ".join(p.served_models) or "not probed"
        image = f"sha256 {p.image_sha256[:12]}" if p.image_sha256 else "none"
        grader = f"; MLE-bench {p.mlebench_version}" if p.mlebench_version else ""
        lines.append(
            f"{directory}: harness {p.harness_version}, code {code}; models {models}; image {image}{grader}; "
            f"launched {p.created_at:%Y-%m-%d %H:%M} UTC"
        )
    found = sweep.found  # the trials with a report, listed once per sweep
    versions = mlebench_versions([t.report for t in found])
    if versions:
        counted = len(found)
        graded = ", ".join(f"MLE-bench {version}: {count}" for version, count in versions.items())
        rest = counted - sum(versions.values())
        lines.append(
            f"counted grading reports by the grader that wrote them: {graded}"
            + (f"; built-in grader or not recorded: {rest}" if rest else "")
        )
    return lines


def problem_lines(sweep: Sweep, limit: int = 50) -> list[str]:
    """One line per problem (missing, invalid, duplicate, failed, unexpected, dir-level)."""
    lines = [f"dir: {p}" for p in sweep.problems]
    for t in sweep.missing:
        if t.superseded is not None:
            lines.append(f"missing: {t.trial_id} ({t.superseded})")
        else:
            lines.append(f"missing: {t.trial_id}" + (f" (status {t.state}: {t.cause})" if t.state else ""))
    lines += [
        f"superseded: {t.trial_id} ({t.superseded})" for t in sweep.superseded if t.settled_without_report
    ]
    lines += [f"{t.problem}: {t.trial_id}" for t in sweep.invalid]
    lines += [f"duplicate: {trial_id}" for trial_id in sweep.duplicates]
    lines += [f"failed: {t.trial_id}: {t.cause or 'no cause recorded'}" for t in sweep.failed]
    lines += [f"unexpected report: {path}" for path in sweep.unexpected]
    if len(lines) > limit:
        lines = [*lines[:limit], f"… and {len(lines) - limit} more (see report.md)"]
    return lines
