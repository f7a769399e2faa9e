"""A trial's grading report, status.json and result.json, read onto its `Trial` for the audit: through the
parsed-inputs cache (a digest's text, while its file is unchanged) or from the file, validated the same.

Reads `runs/<configuration>/<task>_seed<seed>_grading_report.json` and the trial dir's status.json and
result.json; writes nothing.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from pydantic import ValidationError

from mle_world import layout
from mle_world.audit.cache import ParsedInputs, text_of
from mle_world.grading.report import GradingReport
from mle_world.records import AgentResult, TrialStatus
from mle_world.storage import M, Unreadable, load_record, read_regular, read_text

if TYPE_CHECKING:
    from mle_world.audit.collect import Trial


def _report_text(data: bytes) -> str | None:
    """A report's bytes as `read_text` reads them; None when not UTF-8 (`read_text` then says so)."""
    try:
        return text_of(data)
    except UnicodeDecodeError:
        return None


def _not_kept(text: str) -> None:
    """A report's text is not kept, only its stamp: reading the file again costs a re-audit less than
    loading its kept text (100,000 reports: 72 of the 156 MB kept, 0.8 s to load and about as much to
    write on the first audit) and validating it is the same work either way."""
    return None


def _text(data: object) -> str:
    if type(data) is not str:
        raise TypeError("not a text")
    return data


def load_report(
    trial: Trial, listed: bool | None = None, path: str | None = None, parsed: ParsedInputs | None = None
) -> None:
    """Attach the trial's report, or record why there is none (never raises).

    `listed`: whether its directory listing has the report (saves a stat per trial); None to look.
    `path`: the report's path as a string when the caller has it (saves building a Path).
    `parsed`: the texts an earlier audit read, used while the file is unchanged (validated the same).
    """
    if path is None:
        path = trial.report_text
    if listed is False or (listed is None and not os.path.exists(path)):
        trial.problem = "missing"
        return
    try:
        if parsed is None:
            text = read_text(path)
        else:
            text = parsed.get("report", path, read_text, _not_kept, _text, _report_text)
        report = GradingReport.model_validate_json(text)
    except FileNotFoundError:
        trial.problem = "missing"
        return
    except (OSError, UnicodeDecodeError) as exc:
        trial.problem = f"invalid: unreadable ({type(exc).__name__})"
        return
    except ValidationError as exc:
        kind = "corrupt JSON" if any(e["type"] == "json_invalid" for e in exc.errors()) else "schema"
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        trial.problem = f"invalid: {kind} ({where}: {first['msg']})" if where else f"invalid: {kind}"
        return
    if report.trial_id != trial.trial_id:
        trial.problem = f"invalid: report is for {report.trial_id}"
        return
    trial.report = report


def _record_text(data: bytes) -> str | None:
    """A record's bytes as `storage.load_record` reads them; None when not UTF-8 (that read then says so)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _read_record_text(path: str) -> str:
    return read_regular(path).decode("utf-8")


def _load(trial: Trial, kind: str, name: str, model: type[M], parsed: ParsedInputs | None) -> M | Unreadable:
    """`storage.load_record` of the trial's `name`, its text from `parsed` (a digest's, or read and stamped)."""
    path = trial.file(name)
    if parsed is None:
        return load_record(path, model)
    try:
        return model.model_validate_json(
            parsed.get(kind, path, _read_record_text, _not_kept, _text, _record_text)
        )
    except (OSError, UnicodeDecodeError, ValidationError) as exc:
        return Unreadable(path, exc)


def load_status(trial: Trial, parsed: ParsedInputs | None = None) -> None:
    """Attach state and cause from status.json when readable."""
    if not trial.may_have(layout.STATUS):
        return
    status = _load(trial, "status", layout.STATUS, TrialStatus, parsed)
    if isinstance(status, Unreadable):
        if not isinstance(status.error, (FileNotFoundError, NotADirectoryError, IsADirectoryError)):
            trial.cause = "unreadable status.json"
        return
    trial.state = status.state
    trial.cause = status.cause
    trial.failure_class = status.failure_class
    trial.downtime_s = status.downtime_s
    trial.attempt = status.attempt
    trial.launches = status.launches


def load_result(trial: Trial, parsed: ParsedInputs | None = None) -> None:
    """Attach the agent's result.json when readable (stop reason and counters for the budget table)."""
    if not trial.may_have(layout.RESULT):
        return
    result = _load(trial, "result", layout.RESULT, AgentResult, parsed)
    trial.result = None if isinstance(result, Unreadable) else result
