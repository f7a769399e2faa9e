"""Render the audit: rich tables, `audit/summary.csv` and `audit/report.md` (plots: `audit/plots.py`).

Reads the computed audit tables; writes `<out_dir>/summary.csv`, `report.md` (atomically) and, through
`plots`, the PNGs.

Longer than 400 lines because each table is still written three times by hand (CSV, markdown, rich);
one table model with three writers is the split left to do.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

from mle_world.audit.analysis import (
    DELTA_METRICS,
    LABELS,
    RATE_METRICS,
    BudgetRow,
    CostRow,
    Curve,
    DeltaRow,
    RateRow,
    WorldRow,
    calibration_rows,
)
from mle_world.audit.collect import Sweep
from mle_world.audit.plots import write_plots
from mle_world.audit.stats import MeanSem
from mle_world.storage import write_text_atomic

SUMMARY_COLUMNS = ("section", "regime", "configuration", "metric", "value", "sem", "n")


@dataclass
class AuditResult:
    """Everything the audit computed."""

    sweep: Sweep
    rates: list[RateRow]
    deltas: list[DeltaRow]
    costs: list[CostRow]
    world: list[WorldRow]
    curves: list[Curve]
    pad_missing: bool
    budgets: list[BudgetRow] = field(default_factory=list)


def _num(value: float | None, digits: int = 2) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def _ms(value: MeanSem, digits: int = 2) -> str:
    if value.mean is None:
        return "–"
    return f"{value.mean:.{digits}f} ± {(value.sem or 0.0):.{digits}f}"


# --------------------------------------------------------------------------- summary.csv


def summary_rows(result: AuditResult) -> list[dict[str, object]]:
    """Long-format rows: one value per section x regime x configuration x metric."""
    rows: list[dict[str, object]] = []

    def add(
        section: str, regime: str, cfg: str, metric: str, value: object, sem: object = None, n: object = None
    ) -> None:
        rows.append(
            {"section": section, "regime": regime, "configuration": cfg, "metric": metric,
             "value": value, "sem": sem, "n": n}
        )  # fmt: skip

    sweep = result.sweep
    add("completeness", "", "", "expected", len(sweep.trials))
    add("completeness", "", "", "found", len(sweep.found))
    add("completeness", "", "", "missing", len(sweep.missing))
    add("completeness", "", "", "invalid", len(sweep.invalid))
    add("completeness", "", "", "duplicate", len(sweep.duplicates))
    add("completeness", "", "", "failed", len(sweep.failed))
    add("completeness", "", "", "unexpected", len(sweep.unexpected))
    rode_out = [t for t in sweep.trials if t.downtime_s > 0]
    add("completeness", "", "", "trials_with_endpoint_downtime", len(rode_out))
    add("completeness", "", "", "endpoint_downtime_s", round(sum(t.downtime_s for t in rode_out), 3))
    for r in result.rates:
        add("rates", r.regime, r.configuration, "seeds_used", len(r.seeds_used), None, len(r.seeds_expected))
        for metric in RATE_METRICS:
            ms = r.rates[metric]
            add("rates", r.regime, r.configuration, metric, ms.mean, ms.sem, ms.n)
    for d in result.deltas:
        for metric in DELTA_METRICS:
            ms = d.deltas[metric]
            add("paired_delta", "gated-ungated", d.configuration, metric, ms.mean, ms.sem, ms.n)
        add(
            "paired_delta",
            "gated-ungated",
            d.configuration,
            "score_gated_better",
            d.gated_better,
            None,
            d.pairs,
        )
        add(
            "paired_delta",
            "gated-ungated",
            d.configuration,
            "score_gated_worse",
            d.gated_worse,
            None,
            d.pairs,
        )
        add("paired_delta", "gated-ungated", d.configuration, "score_ties", d.ties, None, d.pairs)
    for c in result.costs:
        add("costs", c.regime, c.configuration, "cost_per_trial_usd", c.cost_per_trial.mean,
            c.cost_per_trial.sem, c.cost_per_trial.n)  # fmt: skip
        add("costs", c.regime, c.configuration, "total_cost_usd", c.total_cost, None, c.cost_known)
        add("costs", c.regime, c.configuration, "cost_per_medal_usd", c.cost_per_medal, None, c.medals)
        add("costs", c.regime, c.configuration, "tokens_per_trial", c.tokens_per_trial, None, c.with_costs)
        add(
            "costs",
            c.regime,
            c.configuration,
            "gpu_hours_per_trial",
            c.gpu_hours_per_trial,
            None,
            c.with_costs,
        )
    for bud in result.budgets:
        for stop, count in bud.stopped.items():
            add("budget", bud.regime, bud.configuration, f"stopped_{stop}", count, None, bud.with_result)
        add(
            "budget",
            bud.regime,
            bud.configuration,
            "executed_per_trial",
            bud.executed.mean,
            bud.executed.sem,
            bud.executed.n,
        )
        add(
            "budget",
            bud.regime,
            bud.configuration,
            "steps_per_trial",
            bud.steps.mean,
            bud.steps.sem,
            bud.steps.n,
        )
        for name in ("consulted_steps", "vetoed_steps", "not_selected", "direction_from_task",
                     "direction_disagreements", "metric_mismatches", "context_overflows"):  # fmt: skip
            add("budget", bud.regime, bud.configuration, name, getattr(bud, name), None, bud.with_result)
    for w in result.world:
        add("world", w.regime, w.configuration, "skip_rate", w.skip_rate, None, w.decisions)
        add("world", w.regime, w.configuration, "executions_saved", w.executions_saved, None, w.decisions)
        add("world", w.regime, w.configuration, "not_selected", w.not_selected, None, w.predictions)
        add("world", w.regime, w.configuration, "would_skip", w.would_skip, None, w.decisions)
        add("world", w.regime, w.configuration, "gate_precision", w.gate_precision, None, None)
        add("world", w.regime, w.configuration, "gate_recall", w.gate_recall, None, None)
        add("world", w.regime, w.configuration, "accuracy", w.accuracy, None, w.labelled)
        add("world", w.regime, w.configuration, "brier", w.brier, None, w.labelled)
        add("world", w.regime, w.configuration, "bug_brier", w.bug_brier, None, w.bug_labelled)
        for b in w.bins:
            add("calibration", w.regime, w.configuration, f"bin_{b.lower:.1f}_{b.upper:.1f}_observed",
                b.observed_rate, b.mean_predicted, b.size)  # fmt: skip
    return rows


def summary_csv(result: AuditResult) -> str:
    """`audit/summary.csv` text; unknown values are empty cells."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, SUMMARY_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in summary_rows(result):
        writer.writerow({k: "" if v is None else (repr(round(v, 6)) if isinstance(v, float) else v)
                         for k, v in row.items()})  # fmt: skip
    return buffer.getvalue()


# --------------------------------------------------------------------------- tables


def completeness_table(sweep: Sweep) -> Table:
    """Expected vs found and the problem lists."""
    table = Table(title="Completeness")
    for column in ("expected", "found", "missing", "invalid", "duplicate", "failed", "unexpected"):
        table.add_column(column, justify="right")
    table.add_row(*(str(x) for x in (
        len(sweep.trials), len(sweep.found), len(sweep.missing), len(sweep.invalid),
        len(sweep.duplicates), len(sweep.failed), len(sweep.unexpected))))  # fmt: skip
    return table


def rates_table(rows: Sequence[RateRow], pad_missing: bool) -> Table:
    """Medal rates per regime x configuration."""
    note = "all seeds, missing = 0" if pad_missing else "complete seeds only"
    table = Table(title=f"Rates, mean ± SEM over seeds (%; {note})")
    table.add_column("regime")
    table.add_column("configuration")
    table.add_column("tasks", justify="right")
    table.add_column("seeds", justify="right")
    for metric in RATE_METRICS:
        table.add_column(LABELS[metric], justify="right")
    for r in rows:
        table.add_row(
            r.regime, r.configuration, str(r.tasks), f"{len(r.seeds_used)}/{len(r.seeds_expected)}",
            *(_ms(r.rates[m]) for m in RATE_METRICS),
        )  # fmt: skip
    return table


def deltas_table(rows: Sequence[DeltaRow]) -> Table:
    """Paired gated − ungated deltas."""
    table = Table(title="Paired gated − ungated (same task and seed; percentage points, mean ± SEM)")
    table.add_column("configuration")
    table.add_column("pairs", justify="right")
    for metric in DELTA_METRICS:
        table.add_column(f"Δ {LABELS[metric]}", justify="right")
    table.add_column("score better/worse/tie", justify="right")
    for d in rows:
        table.add_row(d.configuration, str(d.pairs), *(_ms(d.deltas[m]) for m in DELTA_METRICS),
                      f"{d.gated_better}/{d.gated_worse}/{d.ties}")  # fmt: skip
    return table


def costs_table(rows: Sequence[CostRow]) -> Table:
    """Cost per trial and per medal."""
    table = Table(title="Costs (USD; trials whose every cost row is priced)")
    for column in ("regime", "configuration", "trials", "priced", "$/trial", "total $", "medals", "$/medal",
                   "tokens/trial", "GPU-h/trial"):  # fmt: skip
        table.add_column(column, justify="left" if column in ("regime", "configuration") else "right")
    for c in rows:
        table.add_row(
            c.regime, c.configuration, str(c.trials), f"{c.cost_known}/{c.with_costs}", _ms(c.cost_per_trial),
            _num(c.total_cost), str(c.medals), _num(c.cost_per_medal), _num(c.tokens_per_trial, 0),
            _num(c.gpu_hours_per_trial, 3),
        )  # fmt: skip
    return table


WORLD_HEADER = ("regime", "configuration", "predictions", "invalid", "consulted", "vetoed", "not selected",
                "skip rate", "saved", "would skip", "gate prec.", "gate recall", "labelled", "accuracy",
                "Brier", "bug Brier")  # fmt: skip
BUDGET_HEADER = ("regime", "configuration", "trials", "max_steps", "time_limit", "failed", "executed/trial",
                 "steps/trial", "consulted", "vetoed", "not selected", "direction known", "direction disagr.",
                 "metric mismatches", "context overflows")  # fmt: skip


def world_cells(w: WorldRow) -> list[str]:
    return [w.regime, w.configuration, str(w.predictions), str(w.invalid), str(w.decisions), str(w.skipped),
            str(w.not_selected), _num(w.skip_rate, 3), str(w.executions_saved), str(w.would_skip),
            _num(w.gate_precision, 3), _num(w.gate_recall, 3), str(w.labelled), _num(w.accuracy, 3),
            _num(w.brier, 4), _num(w.bug_brier, 4)]  # fmt: skip


def budget_cells(b: BudgetRow) -> list[str]:
    return [b.regime, b.configuration, str(b.trials), str(b.stopped["max_steps"]), str(b.stopped["time_limit"]),
            str(b.stopped["failed"]), _ms(b.executed, 1), _ms(b.steps, 1), str(b.consulted_steps),
            str(b.vetoed_steps), str(b.not_selected), f"{b.direction_from_task}/{b.with_result}",
            str(b.direction_disagreements), str(b.metric_mismatches), str(b.context_overflows)]  # fmt: skip


def _table(title: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> Table:
    table = Table(title=title)
    for column in header:
        table.add_column(column, justify="left" if column in ("regime", "configuration") else "right")
    for row in rows:
        table.add_row(*row)
    return table


def world_table(rows: Sequence[WorldRow]) -> Table:
    """World-model statistics."""
    title = "World model (skips from gated; accuracy/Brier and gate precision/recall from ungated)"
    return _table(title, WORLD_HEADER, [world_cells(w) for w in rows])


def budget_table(rows: Sequence[BudgetRow]) -> Table:
    """Stop reasons, executions and agent data-quality counters."""
    return _table("Budget and data quality (result.json)", BUDGET_HEADER, [budget_cells(b) for b in rows])


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


def problem_lines(sweep: Sweep, limit: int = 50) -> list[str]:
    """One line per problem (missing, invalid, duplicate, failed, unexpected, dir-level)."""
    lines = [f"dir: {p}" for p in sweep.problems]
    lines += [f"missing: {t.trial_id}" + (f" (status {t.state}: {t.cause})" if t.state else "")
              for t in sweep.missing]  # fmt: skip
    lines += [f"{t.problem}: {t.trial_id}" for t in sweep.invalid]
    lines += [f"duplicate: {trial_id}" for trial_id in sweep.duplicates]
    lines += [f"failed: {t.trial_id}: {t.cause or 'no cause recorded'}" for t in sweep.failed]
    lines += [f"unexpected report: {path}" for path in sweep.unexpected]
    if len(lines) > limit:
        lines = [*lines[:limit], f"… and {len(lines) - limit} more (see report.md)"]
    return lines


def print_tables(result: AuditResult, console: Console) -> None:
    """Rich tables on the terminal."""
    console.print(completeness_table(result.sweep))
    line = downtime_line(result.sweep)
    if line:
        console.print(line, markup=False, highlight=False)
    for line in problem_lines(result.sweep):
        console.print(f"  {line}", markup=False, highlight=False)
    console.print(rates_table(result.rates, result.pad_missing))
    if result.deltas:
        console.print(deltas_table(result.deltas))
    if any(c.with_costs for c in result.costs):
        console.print(costs_table(result.costs))
    if result.budgets:
        console.print(budget_table(result.budgets))
    if result.world:
        console.print(world_table(result.world))


# --------------------------------------------------------------------------- report.md


def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def report_markdown(result: AuditResult, plots: Sequence[str]) -> str:
    """`audit/report.md`."""
    sweep = result.sweep
    parts = [
        "# Audit report",
        "",
        "Inputs: " + ", ".join(f"`{d}`" for d in sweep.dirs),
        "",
        "## Completeness",
        "",
    ]
    parts.append(_md_table(
        ["expected", "found", "missing", "invalid", "duplicate", "failed", "unexpected"],
        [[str(x) for x in (len(sweep.trials), len(sweep.found), len(sweep.missing), len(sweep.invalid),
                           len(sweep.duplicates), len(sweep.failed), len(sweep.unexpected))]],
    ))  # fmt: skip
    downtime = downtime_line(sweep)
    if downtime:
        parts += ["", downtime]
    problems = problem_lines(sweep, limit=10_000)
    if problems:
        parts += ["", *(f"- {line}" for line in problems)]
    note = "every seed, missing reports count as failures (--pad-missing)" if result.pad_missing else (
        "complete seeds only (every task of the configuration has a report)")  # fmt: skip
    parts += ["", "## Rates", "", f"Mean ± SEM over seeds (%, ddof=1), {note}.", ""]
    parts.append(_md_table(
        ["regime", "configuration", "tasks", "seeds", *(LABELS[m] for m in RATE_METRICS)],
        [[r.regime, r.configuration, str(r.tasks), f"{len(r.seeds_used)}/{len(r.seeds_expected)}",
          *(_ms(r.rates[m]) for m in RATE_METRICS)] for r in result.rates],
    ))  # fmt: skip
    if result.deltas:
        parts += [
            "",
            "## Paired gated − ungated",
            "",
            "Same task and seed; percentage points, mean ± SEM over pairs.",
            "",
        ]
        parts.append(_md_table(
            ["configuration", "pairs", *(f"Δ {LABELS[m]}" for m in DELTA_METRICS), "score better/worse/tie"],
            [[d.configuration, str(d.pairs), *(_ms(d.deltas[m]) for m in DELTA_METRICS),
              f"{d.gated_better}/{d.gated_worse}/{d.ties}"] for d in result.deltas],
        ))  # fmt: skip
    if any(c.with_costs for c in result.costs):
        parts += [
            "",
            "## Costs",
            "",
            "USD, from costs/*.csv; a trial counts as priced when every row has a cost.",
            "",
        ]
        parts.append(_md_table(
            ["regime", "configuration", "trials", "priced", "$/trial", "total $", "medals", "$/medal",
             "tokens/trial", "GPU-h/trial"],
            [[c.regime, c.configuration, str(c.trials), f"{c.cost_known}/{c.with_costs}", _ms(c.cost_per_trial),
              _num(c.total_cost), str(c.medals), _num(c.cost_per_medal), _num(c.tokens_per_trial, 0),
              _num(c.gpu_hours_per_trial, 3)] for c in result.costs],
        ))  # fmt: skip
    if result.budgets:
        parts += ["", "## Budget and data quality", "",
                  "Which limit stopped each trial (max_steps counts executed nodes), executions and loop steps per "
                  "trial (mean ± SEM), world-model steps consulted/vetoed and candidates not selected, and how "
                  "often the metric direction came from the task, reviews disagreed with it, the printed metric "
                  "disagreed with the reviewer's, or a prompt overflowed the context window. See "
                  "docs/numbers.md.", ""]  # fmt: skip
        parts.append(_md_table(BUDGET_HEADER, [budget_cells(b) for b in result.budgets]))
    if result.world:
        parts += ["", "## World model", "",
                  "Skip rate = vetoed steps / consulted steps (gated); a candidate that merely lost the ranking "
                  "is 'not selected', not a skip; executions saved = vetoed steps. Would skip, gate precision "
                  "and recall come from the counterfactual gate decision recorded by ungated runs. Accuracy "
                  "(p_improves ≥ 0.5) and Brier score of p_improves against real improvement, from executed "
                  "ungated nodes; per stage and mode in index.html.", ""]  # fmt: skip
        parts.append(_md_table(WORLD_HEADER, [world_cells(w) for w in result.world]))
        stages = calibration_rows(sweep)
        if stages:
            parts += ["", "Calibration per stage and mode (executed, valid ungated predictions):", ""]
            parts.append(_md_table(
                ["stage", "mode", "labelled", "accuracy", "Brier", "bug labelled", "bug Brier"],
                [[c.stage, c.mode, str(c.labelled), _num(c.accuracy, 3), _num(c.brier, 4), str(c.bug_labelled),
                  _num(c.bug_brier, 4)] for c in stages],
            ))  # fmt: skip
        overall = next((w for w in result.world if w.configuration == "all"), None)
        if overall is not None:
            parts += ["", "Calibration (all ungated predictions):", ""]
            parts.append(_md_table(
                ["bin", "count", "mean predicted", "observed"],
                [[f"{b.lower:.1f}–{b.upper:.1f}", str(b.size), _num(b.mean_predicted, 3), _num(b.observed_rate, 3)]
                 for b in overall.bins],
            ))  # fmt: skip
    if plots:
        parts += ["", "## Plots", "", *(f"![{name}]({name})" for name in plots)]
    return "\n".join(parts) + "\n"


def write_outputs(result: AuditResult, out_dir: Path, plots: bool = True) -> list[Path]:
    """summary.csv, report.md and the PNGs into `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    names = write_plots(result.rates, result.world, result.curves, out_dir) if plots else []
    write_text_atomic(out_dir / "summary.csv", summary_csv(result))
    write_text_atomic(out_dir / "report.md", report_markdown(result, names))
    return [out_dir / "summary.csv", out_dir / "report.md", *(out_dir / n for n in names)]
