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
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from markupsafe import Markup

from mle_world import layout
from mle_world.audit.analysis import CalibrationRow, Curve, WorldRow
from mle_world.audit.collect import Sweep, Trial, trial_events
from mle_world.audit.comparisons import BASELINE
from mle_world.audit.headline import NOTE as HEADLINE_NOTE
from mle_world.audit.headline import comparisons_table, headline_table
from mle_world.audit.journals import trial_journal
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
from mle_world.audit.tables import Column, Table, filled, html
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
    return env


def shown(value: object) -> object:
    """A template's value as shown: text with its control and bidi characters as escapes (a served model
    id's U+202E reordered the page's text; `cat` on the page ran its ESC sequences), then autoescaped.
    Markup is HTML built here: the tables, whose cells `tables.html` escapes the same way."""
    return printable(value) if isinstance(value, str) and not isinstance(value, Markup) else value


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


class TrialRow(NamedTuple):
    """One line of the index's trial table (strings, ready to show), in the table's column order.

    A named tuple rather than a frozen dataclass: a sweep has tens of thousands of trials, and building
    a frozen dataclass costs three times as much.
    """

    trial_id: str
    state: str
    score: str
    medal: str
    nodes: str
    executed: str
    skipped: str
    buggy: str
    best: str
    cost: str
    note: str
    href: str | None


TRIAL_COLUMNS: list[Column[TrialRow]] = [
    Column("trial", itemgetter(0), left=True, nowrap=True),
    *(
        Column[TrialRow](label, itemgetter(index), left=True)
        for index, label in enumerate(
            (
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
            ),
            start=1,
        )
    ),
]


def trials_table(trials: list[TrialRow]) -> Table:
    """The trial id and the columns that hold anything in this sweep (a big sweep without journals or
    costs renders a narrower, faster table)."""
    cells = itemgetter(slice(0, len(TRIAL_COLUMNS)))  # a row's fields are its cells, in column order
    rows = tuple(map(cells, trials))
    table = Table("trials", "Trials", tuple(TRIAL_COLUMNS), rows, tuple(t.href for t in trials))  # type: ignore[arg-type]
    return filled(table, keep=1)


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


NO_JOURNAL = ("", "", "", "", "")
"""The journal's cells of a trial without one: nodes, executed, skipped, buggy, best metric."""


def _counts(journal: Any) -> tuple[str, str, str, str, str]:
    nodes = journal.get("nodes") if isinstance(journal, dict) else None
    if not isinstance(nodes, list):
        return NO_JOURNAL
    good = [n for n in nodes if isinstance(n, dict) and n.get("executed") and not n.get("is_buggy")]
    metrics = [n["metric"] for n in good if isinstance(n.get("metric"), int | float)]
    lower = journal.get("lower_is_better")
    best = (min(metrics) if lower else max(metrics)) if metrics else None
    return (
        str(len(nodes)),
        str(sum(1 for n in nodes if isinstance(n, dict) and n.get("executed"))),
        str(sum(1 for n in nodes if isinstance(n, dict) and n.get("skipped"))),
        str(sum(1 for n in nodes if isinstance(n, dict) and n.get("executed") and n.get("is_buggy"))),
        "" if best is None else f"{best:.4g}",
    )


def _trial_row(trial: Trial, href: str | None) -> TrialRow:
    report = trial.report
    if report is None:
        medal = score = ""
    else:
        medal = (
            "gold"
            if report.gold_medal
            else "silver"
            if report.silver_medal
            else "bronze"
            if report.bronze_medal
            else "–"
        )
        score = "" if report.score is None else f"{report.score:.4g}"
        if not report.valid_submission:
            score = "invalid"
    # A failed trial without a submission is settled (no medal), not missing: the completeness table
    # and the rates count it so.
    note = "no submission (no medal)" if trial.settled_without_report else trial.problem or ""
    if trial.superseded is not None:
        note = f"{note}; {trial.superseded}"
    if trial.cause:
        note = f"{note}; {trial.cause}" if note else trial.cause
    cost = "" if trial.cost_usd is None or trial.rerunning else f"{trial.cost_usd:.2f}"
    counts = _counts(trial_journal(trial))
    return TrialRow(trial.trial_id, trial.state or "", score, medal, *counts, cost, note, href)


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
    re-running the audit during a sweep redraws only the trials that moved.
    """
    links: dict[str, str] = {}
    for trial in sweep.trials:
        if trial_journal(trial) is None:
            continue
        name = trial_page_name(trial.trial_id)
        page = out_dir / "trials" / name
        links[trial.trial_id] = f"trials/{name}"
        try:
            if page.stat().st_mtime_ns > _inputs_mtime(trial):
                continue
        except OSError:
            pass
        report = trial.report.model_dump(mode="json") if trial.report is not None else None
        view = load_trial_view(
            trial.trial_dir,
            trial_id=trial.trial_id,
            journal=trial_journal(trial),
            events=trial_events(trial),
            report=report,
        )
        write_trial_page(view, page, index_href="../index.html")
    return links


def index_view(result: AuditResult, out_dir: Path, plots: Sequence[str], links: dict[str, str]) -> IndexView:
    figures = {FIGURES[name]: _data_uri(out_dir / name) for name in plots if name in FIGURES}
    sweep = result.sweep
    calibration = result.calibration_per_stage()
    trials = [_trial_row(t, links.get(t.trial_id)) for t in sweep.trials]
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
        trials_table(trials),
        whatif_table(result.whatif.rows),
    ]
    return IndexView(
        result=result,
        baseline=BASELINE,
        figures=figures,
        tables={t.name: Markup(html(t)) for t in tables},
        filled={t.name for t in tables if t.rows},
        calibration=calibration,
        trials=len(trials),
        linked=sum(1 for t in trials if t.href),
        problems=problem_lines(sweep, limit=10_000),
        has_costs=has_costs(result),
    )


def write_pages(result: AuditResult, out_dir: Path, plots: Sequence[str], pages: bool = True) -> list[Path]:
    """`out_dir/index.html` and (unless `pages` is off) the trial pages it links to."""
    links = write_trial_pages(result.sweep, out_dir) if pages else {}
    index = out_dir / "index.html"
    write_text_atomic(
        index, render("index.html.j2", v=index_view(result, out_dir, plots, links)), mode=PAGE_MODE
    )
    return [index]
