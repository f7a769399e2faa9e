"""One expected trial as the audit sees it (`Trial`), and its grading report, status.json and result.json read
onto it: through the parsed-inputs cache (a digest's entry, while its file is unchanged) or from the file,
validated the same.

Reads `runs/<configuration>/<task>_seed<seed>_grading_report.json` and the trial dir's status.json and
result.json; writes nothing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import ValidationError

from mle_world import layout
from mle_world.audit.attempts import FINAL_STATES
from mle_world.audit.cache import ParsedInputs, text_of
from mle_world.audit.predictions import PredictionLines
from mle_world.audit.report_view import ReportView, read_report
from mle_world.audit.report_view import decode as decode_report
from mle_world.records import AgentResult, TrialStatus
from mle_world.storage import M, Unreadable, load_record, read_regular, read_text


class JournalSummary(NamedTuple):
    """What the audit's tables keep of a trial's journal: the trial table's cells and the best-metric curve.

    A real journal is hundreds of KB (every node's code, plan and output) and its parsed JSON several times
    that: held for every trial until the pages were written, 1,000 trials took 700 MB.
    """

    cells: tuple[str, str, str, str, str]
    """The trial table's nodes, executed, skipped, buggy and best metric (`NO_JOURNAL`: none)."""
    curve: list[tuple[float, float]]
    lower: bool | None
    has_nodes: bool
    present: bool
    """Whether the trial has a readable journal (a page is written for it)."""


NO_JOURNAL = ("", "", "", "", "")
"""The journal's cells of a trial without one: nodes, executed, skipped, buggy, best metric."""
ABSENT = JournalSummary(NO_JOURNAL, [], None, False, False)


@dataclass(slots=True)
class Trial:
    """One expected trial and what was found for it (slots: 100,000 of them are held at once)."""

    trial_id: str
    regime: str
    configuration: str
    task: str
    seed: int
    output_dir: Path
    dir_text: str
    """Its trial dir (the one launch.json records, else the canonical one), as a string."""
    report_text: str
    """Where its grading report lives (`layout.report_beside` the canonical trial dir), as a string."""
    report: ReportView | None = None
    problem: str | None = None
    """'missing' or 'invalid: …' when there is no usable report."""
    state: str | None = None
    cause: str | None = None
    failure_class: str | None = None
    """status.json's class of a failure: "infra" (the harness's or the cluster's, retried) or "agent"."""
    downtime_s: float = 0.0
    """Endpoint downtime the trial rode out (status.json; excluded from its budget)."""
    attempt: int | None = None
    """status.json's attempt (None without a readable status.json)."""
    launches: tuple[str, ...] = ()
    """status.json's ids of the launches that submitted it, oldest first (audit/launches.py)."""
    superseded: str | None = None
    """Why the report on disk is not counted: a rerun of the trial is queued or running, or ended
    without a report of its own (the report is of an earlier attempt). None when it counts."""
    cost_usd: float | None = None
    cost_known: bool = False
    has_costs: bool = False
    tokens: int | None = None
    """Prompt + completion tokens; None without cost rows or when a role's usage is unknown."""
    gpu_hours: float | None = None
    """None without cost rows or when the execution row's GPU-hours are unknown (no events.jsonl)."""
    dir_missing: bool = field(default=False, repr=False, compare=False)
    """The listing of its configuration dir has no trial dir: skip reading files inside it."""
    recorded_absent: str | None = field(default=None, repr=False, compare=False)
    """The trial dir launch.json records when that is no directory (`dir_text` is the canonical one
    then): should it appear, the trial's files are read there (the memo stamps its absence)."""
    files: frozenset[str] | None = field(default=None, repr=False, compare=False)
    """Names in its trial dir, listed once (None: not listed; look for each file)."""
    result: AgentResult | None = None
    """The agent's result.json (stop reason, counts), when readable."""
    predictions_cache: PredictionLines | None = field(default=None, repr=False, compare=False)
    """events.jsonl's predictions read once (the tables)."""
    journal_cache: JournalSummary | None = field(default=None, repr=False, compare=False)
    """What the tables keep of its journal (`journals.journal_summary`), read once; the journal itself is not
    held (the trial's page reads it again)."""
    settled_cache: bool | None = field(default=None, repr=False, compare=False)
    """`settled_without_report` once looked at."""

    @property
    def trial_dir(self) -> Path:
        return Path(self.dir_text)

    @property
    def rerunning(self) -> bool:
        """A rerun is queued, running or interrupted: its files are an earlier attempt's (not counted)."""
        return self.superseded is not None and self.state not in FINAL_STATES

    @property
    def report_path(self) -> Path:
        return Path(self.report_text)

    def file(self, name: str) -> str:
        """A file in the trial dir, as a string (no Path built per trial and file)."""
        return f"{self.dir_text}/{name}"

    def may_have(self, name: str) -> bool:
        """False when the trial dir is known to hold no `name` (saves a failing open or stat)."""
        return not self.dir_missing and (self.files is None or name in self.files)

    @property
    def settled_without_report(self) -> bool:
        """Failed for the agent's own reasons and left no submission: counts as a non-medal for its seed
        (not missing). An infrastructure failure (node failure, cancelled job, endpoint outage) is no
        result of the agent: the trial is missing until `--retry-failed` reruns it. Looked at once (the
        tables, the completeness counts and the pages each ask; a trial is settled once loaded)."""
        if self.settled_cache is None:
            self.settled_cache = self._settled_without_report()
        return self.settled_cache

    def _settled_without_report(self) -> bool:
        return (
            self.report is None
            and self.state == "failed"
            and self.failure_class != "infra"
            and not (
                self.may_have(layout.SUBMISSION_DIR)
                and (self.trial_dir / layout.SUBMISSION_RELPATH).is_file()
            )
        )


def _report_text(data: bytes) -> str | None:
    """A report's bytes as `read_text` reads them; None when not UTF-8 (`read_text` then says so)."""
    try:
        return text_of(data)
    except UnicodeDecodeError:
        return None


def _not_kept(text: object) -> None:
    """A report's text is not kept, only its stamp: reading the file again costs a re-audit less than
    loading its kept text (100,000 reports: 72 of the 156 MB kept, 0.8 s to load and about as much to
    write on the first audit) and validating it is the same work either way."""
    return None


def _text(data: object) -> str:
    if type(data) is not str:
        raise TypeError("not a text")
    return data


def _report_entry(data: Any) -> str | ReportView:
    """A digest's report entry (`report_view.entry_of`): the text, or the report its values are."""
    return data if type(data) is str else decode_report(data)


def load_report(
    trial: Trial,
    listed: bool | None = None,
    path: str | None = None,
    parsed: ParsedInputs | None = None,
    offered: Any = None,
    at: int | None = None,
) -> None:
    """Attach the trial's report, or record why there is none (never raises).

    `listed`: whether its directory listing has the report (saves a stat per trial); None to look.
    `path`: the report's path as a string when the caller has it (saves building a Path).
    `parsed`: the texts an earlier audit read, used while the file is unchanged (validated the same);
    `offered`: the trial's digest's entry for it (`ParsedInputs.get`); `at`: the fd of the report's dir,
    for that entry's check.
    """
    if path is None:
        path = trial.report_text
    if listed is False or (listed is None and not os.path.exists(path)):
        trial.problem = "missing"
        return
    try:
        got: str | ReportView = (
            read_text(path)
            if parsed is None
            else parsed.get(
                "report",
                path,
                read_text,
                _not_kept,
                _report_entry,
                _report_text,
                offered,
                at,
                "" if at is None else path.rpartition("/")[2],
            )  # fmt: skip
        )
        report = got if isinstance(got, ReportView) else read_report(got)
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


def _load(
    trial: Trial,
    kind: str,
    name: str,
    model: type[M],
    parsed: ParsedInputs | None,
    offered: Any,
    at: int | None = None,
) -> M | Unreadable:
    """`storage.load_record` of the trial's `name`, its text from `parsed` (a digest's, or read and stamped;
    `at`: the fd of the trial dir's parent, for the digest's entry's check)."""
    path = trial.file(name)
    if parsed is None:
        return load_record(path, model)
    relative = "" if at is None else f"{trial.dir_text.rpartition('/')[2]}/{name}"
    try:
        return model.model_validate_json(
            parsed.get(kind, path, _read_record_text, _not_kept, _text, _record_text, offered, at, relative)
        )
    except (OSError, UnicodeDecodeError, ValidationError) as exc:
        return Unreadable(path, exc)


def load_status(
    trial: Trial, parsed: ParsedInputs | None = None, offered: Any = None, at: int | None = None
) -> None:
    """Attach state and cause from status.json when readable (`offered`: its digest entry, `at`: the fd of
    the trial dir's parent, as `load_report`)."""
    if not trial.may_have(layout.STATUS):
        return
    status = _load(trial, "status", layout.STATUS, TrialStatus, parsed, offered, at)
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


def load_result(
    trial: Trial, parsed: ParsedInputs | None = None, offered: Any = None, at: int | None = None
) -> None:
    """Attach the agent's result.json when readable (stop reason and counters for the budget table;
    `offered`: its digest entry, `at`: the fd of the trial dir's parent, as `load_report`)."""
    if not trial.may_have(layout.RESULT):
        return
    result = _load(trial, "result", layout.RESULT, AgentResult, parsed, offered, at)
    trial.result = None if isinstance(result, Unreadable) else result
