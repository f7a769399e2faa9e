"""The audit's tables, each defined once (`audit/tables.py`), and their files: `summary.csv`, `report.md`.

Reads the computed audit rows; writes `<out_dir>/summary.csv`, `report.md` (atomically) and, through
`plots`, the PNGs; `show_tables` hands the same tables to a display (the terminal's is the CLI's).

Longer than 400 lines because every audit table is defined here once, beside the report.md sections that
show them; the what-if gates' table is the last one appended.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mle_world.audit.analysis import (
    DELTA_METRICS,
    LABELS,
    RATE_METRICS,
    AuditResult,
    BudgetRow,
    CalibrationRow,
    CostTableRow,
    DeltaRow,
    RateRow,
    WorldRow,
)
from mle_world.audit.collect import Sweep
from mle_world.audit.comparisons import BASELINE
from mle_world.audit.headline import NOTE as HEADLINE_NOTE
from mle_world.audit.headline import comparisons_table, headline_table
from mle_world.audit.launches import trials_per_launch
from mle_world.audit.notes import downtime_line, problem_lines, provenance_lines
from mle_world.audit.plots import write_plots, write_whatif_plot
from mle_world.audit.stats import CalibrationBin
from mle_world.audit.summary import completeness_counts, summary_csv
from mle_world.audit.tables import (
    Column,
    Table,
    build,
    markdown,
    mean_sem,
    num,
    show,
)
from mle_world.audit.whatif import WhatIfRow
from mle_world.escapes import markdown_text
from mle_world.launch.display import Display
from mle_world.storage import write_text_atomic

# --------------------------------------------------------------------------- the tables


def completeness_table(sweep: Sweep) -> Table:
    """Expected vs found and the problem lists."""
    counts = completeness_counts(sweep)
    return build("completeness", "Completeness", [_key(name) for name in counts], [counts])


REGIME: Column[Any] = Column("regime", lambda r: r.regime, left=True)
CONFIGURATION: Column[Any] = Column("configuration", lambda r: r.configuration, left=True)


def _key(name: str) -> Column[dict[str, int]]:
    return Column(name, lambda counts: str(counts[name]))


def _stopped(stop: str) -> Column[BudgetRow]:
    return Column(stop, lambda b: str(b.stopped[stop]))


def _count(header: str, attribute: str) -> Column[Any]:
    return Column(header, lambda r: str(getattr(r, attribute)))


def _number(header: str, attribute: str, digits: int) -> Column[Any]:
    return Column(header, lambda r: num(getattr(r, attribute), digits))


def _mean_sem(header: str, attribute: str, digits: int) -> Column[Any]:
    return Column(header, lambda r: mean_sem(getattr(r, attribute), digits))


def _rate(metric: str) -> Column[RateRow]:
    return Column(LABELS[metric], lambda r: mean_sem(r.rates[metric]))


def _delta(metric: str) -> Column[DeltaRow]:
    return Column(f"Δ {LABELS[metric]}", lambda d: mean_sem(d.deltas[metric]))


RATE_COLUMNS: list[Column[RateRow]] = [
    REGIME,
    CONFIGURATION,
    _count("tasks", "tasks"),
    Column("seeds", lambda r: f"{len(r.seeds_used)}/{len(r.seeds_expected)}"),
    *(_rate(m) for m in RATE_METRICS),
]
DELTA_COLUMNS: list[Column[DeltaRow]] = [
    CONFIGURATION,
    _count("pairs", "pairs"),
    *(_delta(m) for m in DELTA_METRICS),
    Column("score better/worse/tie", lambda d: f"{d.gated_better}/{d.gated_worse}/{d.ties}"),
]
COST_COLUMNS: list[Column[CostTableRow]] = [
    REGIME,
    CONFIGURATION,
    _count("trials", "trials"),
    Column("priced", lambda c: f"{c.cost_known}/{c.with_costs}"),
    _mean_sem("$/trial", "cost_per_trial", 2),
    _number("total $", "total_cost", 2),
    _count("medals", "medals"),
    _number("$/medal", "cost_per_medal", 2),
    _number("tokens/trial", "tokens_per_trial", 0),
    _number("GPU-h/trial", "gpu_hours_per_trial", 3),
]
BUDGET_COLUMNS: list[Column[BudgetRow]] = [
    REGIME,
    CONFIGURATION,
    Column("with result.json", lambda b: f"{b.with_result}/{b.trials}"),
    *(_stopped(stop) for stop in ("max_steps", "time_limit", "failed")),
    _mean_sem("executed/trial", "executed", 1),
    _mean_sem("steps/trial", "steps", 1),
    _count("consulted", "consulted_steps"),
    _count("vetoed", "vetoed_steps"),
    _count("not selected", "not_selected"),
    Column("direction known", lambda b: f"{b.direction_from_task}/{b.with_result}"),
    _count("direction disagr.", "direction_disagreements"),
    _count("metric mismatches", "metric_mismatches"),
    _count("context overflows", "context_overflows"),
]
_WORLD = {
    "predictions": _count("predictions", "predictions"),
    "invalid": _count("invalid", "invalid"),
    "consulted": _count("consulted", "decisions"),
    "vetoed": _count("vetoed", "skipped"),
    "forced": _count("forced", "forced"),
    "not selected": _count("not selected", "not_selected"),
    "skip rate": _number("skip rate", "skip_rate", 3),
    "saved": _count("saved", "executions_saved"),
    "would skip": _count("would skip", "would_skip"),
    "gate prec.": _number("gate prec.", "gate_precision", 3),
    "gate recall": _number("gate recall", "gate_recall", 3),
    "labelled": _count("labelled", "labelled"),
    "accuracy": _number("accuracy", "accuracy", 3),
    "Brier": _number("Brier", "brier", 4),
    "bug Brier": _number("bug Brier", "bug_brier", 4),
}
WORLD_COLUMNS: list[Column[WorldRow]] = [
    REGIME,
    CONFIGURATION,
    *(c for k, c in _WORLD.items() if k != "forced"),
]
GATE_COLUMNS: list[Column[WorldRow]] = [REGIME, CONFIGURATION, *list(_WORLD.values())[:11]]
"""The gate's share of the world table, with forced steps (index.html)."""
STAGE_COLUMNS: list[Column[CalibrationRow]] = [
    Column("stage", lambda c: c.stage, left=True),
    Column("mode", lambda c: c.mode, left=True),
    _count("labelled", "labelled"),
    _number("accuracy", "accuracy", 3),
    _number("Brier", "brier", 4),
    _count("bug labelled", "bug_labelled"),
    _number("bug Brier", "bug_brier", 4),
]
BIN_COLUMNS: list[Column[CalibrationBin]] = [
    Column("bin", lambda b: f"{b.lower:.1f}–{b.upper:.1f}", left=True),
    _count("count", "size"),
    _number("mean predicted", "mean_predicted", 3),
    _number("observed", "observed_rate", 3),
]


def rates_table(rows: Sequence[RateRow], pad_missing: bool) -> Table:
    """Medal rates per regime x configuration."""
    note = "seeds with a result, missing = 0" if pad_missing else "complete seeds only"
    return build("rates", f"Rates, mean ± SEM over seeds (%; {note})", RATE_COLUMNS, rows)


def deltas_table(rows: Sequence[DeltaRow]) -> Table:
    """Paired gated − ungated deltas."""
    title = "Paired gated − ungated (same task and seed; percentage points, mean ± SEM)"
    return build("deltas", title, DELTA_COLUMNS, rows)


def costs_table(rows: Sequence[CostTableRow]) -> Table:
    """Cost per trial and per medal."""
    return build("costs", "Costs (USD; trials whose every cost row is priced)", COST_COLUMNS, rows)


def world_table(rows: Sequence[WorldRow]) -> Table:
    """World-model statistics."""
    title = "World model (skips from gated; accuracy/Brier and gate precision/recall from ungated)"
    return build("world", title, WORLD_COLUMNS, rows)


def gate_table(rows: Sequence[WorldRow]) -> Table:
    """Gate decisions per regime x configuration (the world table's gate columns and forced steps)."""
    title = "Gate: skip rates and executions saved"
    return build("gate", title, GATE_COLUMNS, [w for w in rows if w.configuration != "all"])


def budget_table(rows: Sequence[BudgetRow]) -> Table:
    """Stop reasons, executions and agent data-quality counters."""
    return build("budget", "Budget and data quality (result.json)", BUDGET_COLUMNS, rows)


def stage_table(rows: Sequence[CalibrationRow]) -> Table:
    """Calibration per stage and mode (executed, valid ungated predictions)."""
    return build("brier", "Calibration per stage and mode", STAGE_COLUMNS, rows)


def bins_table(bins: Sequence[CalibrationBin]) -> Table:
    """Reliability bins of p_improves."""
    return build("bins", "Calibration (all ungated predictions)", BIN_COLUMNS, bins)


def has_costs(result: AuditResult) -> bool:
    return any(c.with_costs for c in result.costs)


def show_tables(result: AuditResult, display: Display) -> None:
    """The tables (and problem lines) on `display`: the terminal, when the CLI passes its rich one."""
    show(completeness_table(result.sweep), display)
    line = downtime_line(result.sweep)
    if line:
        display.say(line)
    for line in problem_lines(result.sweep):
        display.say(f"  {line}")
    show(rates_table(result.rates, result.pad_missing), display)
    comparisons = result.comparisons
    if comparisons:
        show(comparisons_table(comparisons), display)
    if result.deltas:
        show(deltas_table(result.deltas), display)
    if has_costs(result):
        show(costs_table(result.costs), display)
    if result.budgets:
        show(budget_table(result.budgets), display)
    if result.world:
        show(world_table(result.world), display)
    if result.whatif.rows:
        show(whatif_paper_table(result.whatif.paper_rows), display)


# --------------------------------------------------------------------------- report.md

BUDGET_NOTE = (
    "Of the trials with a result.json (one killed, timed out or crashed has none), which limit stopped "
    "each (max_steps counts executed nodes; failed: by the agent's own account), executions and loop "
    "steps per trial (mean ± SEM), world-model steps consulted/vetoed, candidates not selected, and how "
    "often the metric direction came from the task, reviews disagreed with it, the printed metric "
    "disagreed with the reviewer's, or a prompt overflowed the context window. See docs/numbers.md."
)
WORLD_NOTE = (
    "Skip rate = vetoed steps / consulted steps (gated); a candidate that merely lost the ranking "
    "is 'not selected', not a skip; executions saved = vetoed steps. Would skip, gate precision "
    "and recall come from the counterfactual gate decision recorded by ungated runs. Accuracy "
    "(p_improves ≥ 0.5) and Brier score of p_improves against real improvement, from executed "
    "ungated nodes; per stage and mode in index.html."
)


SUPERSEDED_NOTE = (
    "Superseded: trials rerun after their report was written (`--retry-failed`, a resume): the report "
    "is of an earlier attempt, so it is not counted (the trial is missing) until the rerun ends with a "
    "report of its own; a rerun in flight is also left out of the costs. See docs/numbers.md."
)


def _launches_by_dir(sweep: Sweep) -> dict[Path, list[tuple[str, ...]]]:
    """Each output dir's trials' `launches`, in trial order: one pass, not one per dir (comparing two
    Paths was most of report.md's cost at 100,000 trials)."""
    by_dir: dict[Path, list[tuple[str, ...]]] = {}
    directory: Path | None = None
    launches: list[tuple[str, ...]] = []
    for trial in sweep.trials:
        if trial.output_dir is not directory:  # a dir's trials share its Path: hashed once a run
            directory = trial.output_dir
            launches = by_dir.setdefault(directory, [])
        launches.append(trial.launches)
    return by_dir


def report_markdown(result: AuditResult, plots: Sequence[str]) -> str:
    """`audit/report.md`; each line quoting paths, ids or endpoints goes through `markdown_text`."""
    sweep = result.sweep
    parts = ["# Audit report", "", "Inputs: " + ", ".join(markdown_text(str(d)) for d in sweep.dirs), ""]
    provenance = provenance_lines(sweep)
    if provenance:
        parts += [
            "Provenance (each dir's latest launch; launch.json):",
            "",
            *(f"- {markdown_text(line)}" for line in provenance),
            "",
        ]
    launches = _launches_by_dir(sweep)
    per_launch = [
        line
        for directory, history in sweep.launch_history.items()
        if (line := trials_per_launch(directory, history, launches.get(directory, ())))
    ]
    if per_launch:
        parts += ["Trials per launch (the launch that ran each trial's latest attempt; status.json):", ""]
        parts += [*(f"- {markdown_text(line)}" for line in per_launch), ""]
    parts += ["## Completeness", "", markdown(completeness_table(sweep))]
    if sweep.superseded:
        parts += ["", SUPERSEDED_NOTE]
    downtime = downtime_line(sweep)
    if downtime:
        parts += ["", markdown_text(downtime)]
    problems = problem_lines(sweep, limit=10_000)
    if problems:
        parts += ["", *(f"- {markdown_text(line)}" for line in problems)]
    if result.pad_missing:
        note = "every seed with a result for some task, missing reports count as failures (--pad-missing)"
    else:
        note = (
            "complete seeds only (every task of the configuration is settled: it has a report, or it "
            "failed without a submission, which counts as no medal)"
        )
    parts += ["", "## Rates", "", f"Mean ± SEM over seeds (%, ddof=1), {note}.", ""]
    parts.append(markdown(rates_table(result.rates, result.pad_missing)))
    comparisons = result.comparisons
    parts += ["", "## Any medal", "", HEADLINE_NOTE.format(baseline=BASELINE), ""]
    parts.append(markdown(headline_table(result.rates, BASELINE, comparisons)))
    if comparisons:
        parts += ["", "Each comparison, with its discordant pairs and Holm family:", ""]
        parts.append(markdown(comparisons_table(comparisons)))
    if result.deltas:
        parts += ["", "## Paired gated − ungated", ""]
        parts += [
            "Same task and seed; percentage points, mean ± SEM over pairs where both trials are settled "
            "(a failed trial without a submission counts as no medal, no valid submission and no score).",
            "",
        ]
        parts.append(markdown(deltas_table(result.deltas)))
    if has_costs(result):
        parts += [
            "",
            "## Costs",
            "",
            "USD, from costs/*.csv; a trial counts as priced when every row has a cost. Tokens and "
            "GPU-hours per trial average the trials whose rows know them (summary.csv's n).",
            "",
        ]
        parts.append(markdown(costs_table(result.costs)))
    if result.budgets:
        parts += ["", "## Budget and data quality", "", BUDGET_NOTE, ""]
        parts.append(markdown(budget_table(result.budgets)))
    if result.world:
        parts += ["", "## World model", "", WORLD_NOTE, ""]
        parts.append(markdown(world_table(result.world)))
        stages = result.calibration_per_stage()
        if stages:
            parts += ["", "Calibration per stage and mode (executed, valid ungated predictions):", ""]
            parts.append(markdown(stage_table(stages)))
        overall = next((w for w in result.world if w.configuration == "all"), None)
        if overall is not None:
            parts += ["", "Calibration (all ungated predictions):", ""]
            parts.append(markdown(bins_table(overall.bins)))
    parts += whatif_section(result.whatif.rows)
    if plots:
        parts += ["", "## Plots", "", *(f"![{name}]({name})" for name in plots)]
    return "\n".join(parts) + "\n"


def write_outputs(result: AuditResult, out_dir: Path, plots: bool = True, draw: bool = True) -> list[Path]:
    """summary.csv, report.md and the PNGs into `out_dir` (`draw` off: only the PNGs still current)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    names = write_plots(result.rates, result.world, result.curves, out_dir, draw) if plots else []
    names += write_whatif_plot(result.whatif.curves, out_dir, draw) if plots else []
    write_text_atomic(out_dir / "summary.csv", summary_csv(result))
    write_text_atomic(out_dir / "report.md", report_markdown(result, names))
    return [out_dir / "summary.csv", out_dir / "report.md", *(out_dir / n for n in names)]


# --------------------------------------------------------------------------- what-if gates


def _share(header: str, attribute: str) -> Column[WhatIfRow]:
    return Column(header, lambda r: num(getattr(r, attribute), 3))


WHATIF_COLUMNS: list[Column[WhatIfRow]] = [
    CONFIGURATION,
    Column("stage", lambda r: r.stage, left=True),
    Column("threshold", lambda r: num(r.setting.threshold, 2)),
    Column("min conf.", lambda r: num(r.setting.min_confidence, 2)),
    Column("bug thr.", lambda r: num(r.setting.bug_threshold, 2)),
    Column("paper", lambda r: "paper" if r.paper else "", left=True),
    _count("decisions", "decisions"),
    _count("would skip", "would_skip"),
    _share("skip share", "skip_share"),
    _count("forced", "forced"),
    _number("exec h", "hours", 2),
    _number("h saved", "hours_saved", 2),
    _count("improved", "improved"),
    _count("lost", "lost"),
    _share("accuracy", "accuracy"),
    _share("precision", "precision"),
    _share("recall", "recall"),
]
WHATIF_NOTE = (
    "From ungated trials, no model called: the agent's own gate rules replayed on each consulted step's "
    "recorded predictions, for a grid of threshold × min_confidence × bug_threshold per pointwise "
    "configuration and stage ('paper': the configuration's own settings, from its spec.json). A decision "
    "is a step whose executed candidate ran; would skip = the gate would veto it (its execution hours "
    "saved; lost = it improved); forced = would-skips max_consecutive_skips would have run in the recorded "
    "order; precision = would-skips that did not improve / would-skips, recall = / decisions that did not "
    "improve, accuracy = vetoed and did not improve or run and improved. Per decision, not per trial: a "
    "gated search diverges after its first skip. See docs/numbers.md."
)


def whatif_table(rows: Sequence[WhatIfRow]) -> Table:
    """The what-if grid: every setting per configuration and stage."""
    return build("whatif", "What-if gates (ungated, per decision)", WHATIF_COLUMNS, rows)


def whatif_paper_table(rows: Sequence[WhatIfRow]) -> Table:
    """The what-if rows at each configuration's own settings (the terminal's; the grid is in report.md)."""
    title = "What-if gates at each configuration's settings (ungated, per decision; grid in report.md)"
    return build("whatif-paper", title, [c for c in WHATIF_COLUMNS if c.header != "paper"], rows)


def whatif_section(rows: Sequence[WhatIfRow]) -> list[str]:
    """report.md's what-if section (none without rows)."""
    if not rows:
        return []
    return ["", "## What-if gates", "", WHATIF_NOTE, "", markdown(whatif_table(rows))]
