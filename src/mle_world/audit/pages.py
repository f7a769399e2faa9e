"""HTML pages of the audit: `audit/index.html` and one page per trial, from jinja2 templates (autoescaped).

Reads the computed audit tables and trial page models; writes self-contained HTML files atomically.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from markupsafe import Markup

from mle_world import layout
from mle_world.audit.analysis import CalibrationRow, Curve, WorldRow
from mle_world.audit.collect import Sweep, Trial, trial_events
from mle_world.audit.comparisons import BASELINE
from mle_world.audit.headline import NOTE as HEADLINE_NOTE
from mle_world.audit.headline import comparisons_table, headline_table
from mle_world.audit.journals import journal_summary, trial_journal
from mle_world.audit.notes import problem_lines
from mle_world.audit.report import (
    AuditResult,
    budget_table,
    completeness_table,
    costs_table,
    gate_table,
    has_costs,
    rates_table,
    stage_table,
    whatif_table,
)
from mle_world.audit.tables import Column, html, html_columns
from mle_world.audit.trial_records import NO_JOURNAL, JournalSummary
from mle_world.audit.trialview import TrialView, load_trial_view
from mle_world.escapes import printable
from mle_world.storage import write_text_atomic

if TYPE_CHECKING:
    import jinja2

PAGE_MODE = 0o644
"""Pages are readable by a static web server running as another user."""
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@cache
def environment() -> jinja2.Environment:
    """Templates shipped as package data; every value is escaped unless a template says otherwise, and its
    control and bidi characters shown as escapes (`shown`)."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("mle_world.audit", "templates"),
        autoescape=True,
        finalize=shown,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["duration"] = duration
    env.filters["num"] = num
    env.filters["yesno"] = yesno
    return env


def shown(value: object) -> object:
    """A template's value as shown: text with its control and bidi characters as escapes (a served model
    id's U+202E reordered the page's text; `cat` on the page ran its ESC sequences), then autoescaped.
    Markup is HTML built here: the tables, whose cells `tables.html` escapes the same way."""
    return printable(value) if isinstance(value, str) and not isinstance(value, Markup) else value


def num(x: float | None, digits: int = 4) -> str:
    """A number to `digits` significant digits; '–' for unknown. A filter, not a template macro: a trial page
    shows some 1,400 of them, and a macro call cost jinja2 ten times the formatting."""
    return "–" if x is None else f"{x:.{digits}g}"


def yesno(x: bool | None) -> str:
    """yes, no; '–' for unknown."""
    return "–" if x is None else "yes" if x else "no"


def duration(seconds: float | None) -> str:
    """12.3s, 4m05s, 2h07m; '–' for unknown."""
    if seconds is None:
        return "–"
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)


def trial_page_name(trial_id: str) -> str:
    """File name of a trial's page under `audit/trials/` (one flat, link-safe name per trial id)."""
    return _UNSAFE.sub("_", trial_id.replace("/", ".")) + ".html"


def render_trial_page(view: TrialView, index_href: str | None = None) -> str:
    """The trial page; `index_href` links back to the sweep report (relative, so file:// works)."""
    return render("trial.html.j2", view=view, index_href=index_href)


def sweep_index_href(trial_dir: Path, page: Path) -> str | None:
    """Relative link from `page` to the sweep's default `audit/index.html`, when that exists.

    A trial dir is `<output dir>/runs/<configuration>/<task>_seed<seed>`; `audit` writes its index to
    `<output dir>/audit/` unless told otherwise.
    """
    index = layout.OutputFiles(trial_dir.parent.parent.parent).audit / "index.html"
    return os.path.relpath(index, page.parent) if index.is_file() else None


def write_trial_page(view: TrialView, path: Path, index_href: str | None = None) -> Path:
    write_text_atomic(path, render_trial_page(view, index_href), mode=PAGE_MODE)
    return path


FIGURES = {
    "medal_rates.png": "Medal rates",
    "calibration.png": "Calibration",
    "best_metric_over_time.png": "Best metric over time",
    "whatif_gates.png": "What-if gates",
}
"""PNG plots of the audit embedded in index.html (as data URIs, so the page stands alone)."""


TRIAL_COLUMNS: list[Column[object]] = [
    Column("trial", str, left=True, nowrap=True),
    *(
        Column[object](label, str, left=True)
        for label in (
            "state",
            "score",
            "medal",
            "nodes",
            "executed",
            "skipped",
            "buggy",
            "best metric",
            "cost $",
            "problem / cause",
        )
    ),
]
"""The index's trial table: the trial id, then the columns that hold anything in this sweep (a big sweep
without journals or costs renders a narrower, faster table). Its cells are made column by column
(`trial_cells`), so the columns' `cell` is unused."""


def trials_html(
    trials: Sequence[Trial], journals: Sequence[JournalSummary], hrefs: Sequence[str | None]
) -> str:
    """The trial table's HTML: `trial_cells` without the columns empty for every trial (the id stays);
    each trial id links to `hrefs[i]` when it has one."""
    cells = trial_cells(trials, journals)
    shown = [j for j, column in enumerate(cells) if j == 0 or any(column)]
    return html_columns("trials", [TRIAL_COLUMNS[j] for j in shown], [cells[j] for j in shown], hrefs)


@dataclass
class IndexView:
    """Everything index.html shows: its tables come from the same definitions as report.md's."""

    result: AuditResult
    baseline: str
    figures: dict[str, str]
    tables: dict[str, Markup]
    """HTML of each table by name (headline, comparisons, completeness, costs, budget, gate, brier, rates, trials)."""
    filled: set[str]
    """Names of the tables that have rows."""
    calibration: list[CalibrationRow]
    trials: int
    linked: int
    problems: list[str]
    has_costs: bool

    @property
    def sweep(self) -> Sweep:
        return self.result.sweep

    @property
    def dirs(self) -> list[str]:
        return [str(d) for d in self.sweep.dirs]

    @property
    def world(self) -> list[WorldRow]:
        return self.result.world

    @property
    def curves(self) -> list[Curve]:
        return self.result.curves

    @property
    def seed_note(self) -> str:
        if self.result.pad_missing:
            return "every seed with a result for some task; a missing report counts as no medal"
        return (
            "complete seeds only: every task of the configuration has a report or failed without a submission"
        )

    @property
    def headline_note(self) -> str:
        """What the any-medal table's columns are (the same note as report.md's)."""
        return HEADLINE_NOTE.format(baseline=self.baseline)


def _data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def trial_cells(trials: Sequence[Trial], journals: Sequence[JournalSummary]) -> list[list[str]]:
    """The trial table's cells, one list per column of TRIAL_COLUMNS (`journals[i]`: trial i's journal
    summary). A pass per column over 100,000 trials costs less than a function call and a row tuple
    per trial; the journal's five columns are all empty, unbuilt, when no trial left one."""
    reports = [t.report for t in trials]
    medals = [
        ""
        if r is None
        else "gold"
        if r.gold_medal
        else "silver"
        if r.silver_medal
        else "bronze"
        if r.bronze_medal
        else "–"
        for r in reports
    ]
    scores = [
        ""
        if r is None
        else "invalid"
        if not r.valid_submission
        else ""
        if r.score is None
        else f"{r.score:.4g}"
        for r in reports
    ]
    if any(j.present for j in journals):
        by_journal = [list(column) for column in zip(*(j.cells for j in journals), strict=True)]
    else:
        by_journal = [[""] * len(trials)] * len(NO_JOURNAL)
    costs = ["" if t.cost_usd is None or t.rerunning else f"{t.cost_usd:.2f}" for t in trials]
    # Most trials have a report and nothing to note: _note's call only for the others.
    notes = [
        _note(t) if t.report is None or t.problem or t.superseded is not None or t.cause else ""
        for t in trials
    ]
    return [
        [t.trial_id for t in trials],
        [t.state or "" for t in trials],
        scores,
        medals,
        *by_journal,
        costs,
        notes,
    ]


def _note(trial: Trial) -> str:
    """The trial's problem / cause cell."""
    # A failed trial without a submission is settled (no medal), not missing: the completeness table
    # and the rates count it so.
    note = "no submission (no medal)" if trial.settled_without_report else trial.problem or ""
    if trial.superseded is not None:
        note = f"{note}; {trial.superseded}"
    if trial.cause:
        note = f"{note}; {trial.cause}" if note else trial.cause
    return note


def _inputs_mtime(trial: Trial) -> int:
    """Newest modification time (ns) of what a trial page shows, and of the code that draws it."""
    paths = [trial.trial_dir / n for n in layout.TRIAL_RECORDS]
    paths += [trial.report_path, *_code_files()]
    newest = 0
    for path in paths:
        try:
            newest = max(newest, path.stat().st_mtime_ns)
        except OSError:
            continue
    return newest


@cache
def _code_files() -> tuple[Path, ...]:
    here = Path(__file__).parent
    return (
        Path(__file__),
        here / "trialview.py",
        here / "timeline.py",
        *sorted((here / "templates").glob("*.j2")),
    )


def write_trial_pages(sweep: Sweep, out_dir: Path) -> dict[str, str]:
    """A page per trial that left a journal, under `out_dir/trials/`; trial id → link relative to out_dir.

    A page newer than every file it shows (and than the code drawing it) is kept as it is, so
    re-running the audit during a sweep redraws only the trials that moved. One trial at a time: its
    journal and events are read for its page and freed before the next (a sweep's would not fit in memory).
    """
    links: dict[str, str] = {}
    folder = out_dir / "trials"
    for trial in sweep.trials:
        if not journal_summary(trial).present:
            continue
        name = trial_page_name(trial.trial_id)
        page = folder / name
        try:
            if page.stat().st_mtime_ns > _inputs_mtime(trial):
                links[trial.trial_id] = f"trials/{name}"
                continue
        except OSError:
            pass
        journal = trial_journal(trial)
        if journal is None:
            continue  # gone or spoiled since its summary was read: no page drawn, none linked
        links[trial.trial_id] = f"trials/{name}"
        report = trial.report.dump() if trial.report is not None else None
        view = load_trial_view(
            trial.trial_dir,
            trial_id=trial.trial_id,
            journal=journal,
            events=trial_events(trial),
            report=report,
        )
        write_trial_page(view, page, index_href="../index.html")
    return links


def index_view(result: AuditResult, out_dir: Path, plots: Sequence[str], links: dict[str, str]) -> IndexView:
    """What index.html shows."""
    figures = {FIGURES[name]: _data_uri(out_dir / name) for name in plots if name in FIGURES}
    sweep = result.sweep
    trials = sweep.trials
    journals = [journal_summary(t) for t in trials]
    calibration = result.calibration_per_stage()
    hrefs = [links.get(t.trial_id) for t in trials] if links else [None] * len(trials)
    comparisons = result.comparisons
    tables = [
        headline_table(result.rates, BASELINE, comparisons),
        comparisons_table(comparisons),
        completeness_table(sweep),
        costs_table(result.costs),
        budget_table([b for b in result.budgets if b.with_result]),
        gate_table(result.world),
        stage_table(calibration),
        rates_table(result.rates, result.pad_missing),
        whatif_table(result.whatif.rows),
    ]
    html_tables = {t.name: Markup(html(t)) for t in tables}
    html_tables["trials"] = Markup(trials_html(trials, journals, hrefs))
    return IndexView(
        result=result,
        baseline=BASELINE,
        figures=figures,
        tables=html_tables,
        filled={t.name for t in tables if t.rows} | ({"trials"} if trials else set()),
        calibration=calibration,
        trials=len(trials),
        linked=sum(1 for href in hrefs if href),
        problems=problem_lines(sweep, limit=10_000),
        has_costs=has_costs(result),
    )


def write_pages(result: AuditResult, out_dir: Path, plots: Sequence[str], pages: bool = True) -> list[Path]:
    """`out_dir/index.html` and (unless `pages` is off) the trial pages it links to."""
    links = write_trial_pages(result.sweep, out_dir) if pages else {}
    index = out_dir / "index.html"
    view = index_view(result, out_dir, plots, links)
    write_text_atomic(index, render("index.html.j2", v=view), mode=PAGE_MODE)
    return [index]
