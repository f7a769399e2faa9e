"""Which attempt's grading report counts while a trial is rerun (`--retry-failed`, a resume).

Reads a report's `attempt` and the trial's status.json fields (passed in); writes nothing.
"""

from __future__ import annotations

FINAL_STATES = ("succeeded", "failed")


def superseded_by_rerun(
    report_attempt: int | None, state: str, attempt: int | None, cause: str | None
) -> str | None:
    """Why a trial's report is not its current result, or None when it counts (docs/numbers.md, "Reruns").

    The report counts while status.json is final and of the report's attempt. A trial queued, running or
    interrupted again has no result yet: the earlier attempt's report is not counted (the rerun resumes the
    trial and may change its submission). A rerun that ended without grading (its post-trial step failed)
    leaves an older attempt's report: not counted either. A report without an attempt (written before it
    was recorded) counts while the status is final.
    """
    of = f"attempt {report_attempt}" if report_attempt is not None else "an earlier attempt"
    if state == "pending":  # a rerun interrupted (Ctrl-C) or released: the next launch runs it
        return f"waits to be rerun (pending); the report of {of} is not counted"
    if state not in FINAL_STATES:
        if report_attempt is not None and report_attempt == attempt:
            return f"attempt {attempt} {state}: its report counts once status.json records its end"
        run = (
            f"attempt {attempt} {state}" if attempt else state
        )  # status.json of an older harness: no attempt
        return f"rerun: {run}; the report of {of} is not counted"
    if report_attempt is not None and report_attempt != attempt:
        because = f" ({cause})" if cause else ""
        return (
            f"rerun: attempt {attempt} {state} without a report of its own{because}; "
            f"the report of attempt {report_attempt} is not counted"
        )
    return None
