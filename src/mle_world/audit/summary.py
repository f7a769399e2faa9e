"""`audit/summary.csv`: every number of the audit in long format (section, regime, configuration, metric,
value, sem, n), one table of the audit's table model.

Reads the computed audit rows; writes nothing (report.py writes the file).
"""

from __future__ import annotations

from mle_world.audit.analysis import DELTA_METRICS, RATE_METRICS, AuditResult
from mle_world.audit.collect import Sweep
from mle_world.audit.tables import Column, Table, build, csv_text, csv_value

SUMMARY_COLUMNS = ("section", "regime", "configuration", "metric", "value", "sem", "n")


SummaryRow = tuple[str, str, str, str, object, object, object]
"""section, regime, configuration, metric, value, sem, n (raw values; csv_value formats them)."""


def _summary_column(index: int) -> Column[SummaryRow]:
    return Column(SUMMARY_COLUMNS[index], lambda row: csv_value(row[index]))


SUMMARY_TABLE = [_summary_column(i) for i in range(len(SUMMARY_COLUMNS))]
BUDGET_COUNTERS = (
    "consulted_steps",
    "vetoed_steps",
    "not_selected",
    "direction_from_task",
    "direction_disagreements",
    "metric_mismatches",
    "context_overflows",
)


def summary_rows(result: AuditResult) -> list[SummaryRow]:
    """Long-format rows: one value per section x regime x configuration x metric."""
    rows: list[SummaryRow] = []

    def add(
        section: str, group: tuple[str, str], metric: str, value: object, sem: object = None, n: object = None
    ) -> None:
        rows.append((section, group[0], group[1], metric, value, sem, n))

    sweep = result.sweep
    for metric, count in completeness_counts(sweep).items():
        add("completeness", ("", ""), metric, count)
    rode_out = [t for t in sweep.trials if t.downtime_s > 0]
    add("completeness", ("", ""), "trials_with_endpoint_downtime", len(rode_out))
    add("completeness", ("", ""), "endpoint_downtime_s", round(sum(t.downtime_s for t in rode_out), 3))
    for r in result.rates:
        group = (r.regime, r.configuration)
        add("rates", group, "seeds_used", len(r.seeds_used), None, len(r.seeds_expected))
        for metric in RATE_METRICS:
            add("rates", group, metric, *r.rates[metric])
    for d in result.deltas:
        group = ("gated-ungated", d.configuration)
        for metric in DELTA_METRICS:
            add("paired_delta", group, metric, *d.deltas[metric])
        add("paired_delta", group, "score_gated_better", d.gated_better, None, d.pairs)
        add("paired_delta", group, "score_gated_worse", d.gated_worse, None, d.pairs)
        add("paired_delta", group, "score_ties", d.ties, None, d.pairs)
    for t in result.comparisons:
        # regime gated/ungated: against the baseline in that regime; gated-ungated: between the regimes
        group = (t.regime, t.configuration)
        add("significance", group, "any_medal_delta", *t.delta)
        add("significance", group, "any_medal_ci95_low", t.interval.low, None, t.pairs)
        add("significance", group, "any_medal_ci95_high", t.interval.high, None, t.pairs)
        add("significance", group, "discordant_better", t.better, None, t.pairs)
        add("significance", group, "discordant_worse", t.worse, None, t.pairs)
        add("significance", group, "sign_test_p", t.p_value, None, t.better + t.worse)
        add("significance", group, "sign_test_p_holm", t.p_holm, None, t.family_size or None)
    for c in result.costs:
        group = (c.regime, c.configuration)
        add("costs", group, "cost_per_trial_usd", *c.cost_per_trial)
        add("costs", group, "total_cost_usd", c.total_cost, None, c.cost_known)
        add("costs", group, "cost_per_medal_usd", c.cost_per_medal, None, c.medals)
        add("costs", group, "tokens_per_trial", c.tokens_per_trial, None, c.tokens_known)
        add("costs", group, "gpu_hours_per_trial", c.gpu_hours_per_trial, None, c.gpu_known)
    for b in result.budgets:
        group = (b.regime, b.configuration)
        for stop, count in b.stopped.items():
            add("budget", group, f"stopped_{stop}", count, None, b.with_result)
        add("budget", group, "executed_per_trial", *b.executed)
        add("budget", group, "steps_per_trial", *b.steps)
        for name in BUDGET_COUNTERS:
            add("budget", group, name, getattr(b, name), None, b.with_result)
    for w in result.world:
        group = (w.regime, w.configuration)
        add("world", group, "skip_rate", w.skip_rate, None, w.decisions)
        add("world", group, "executions_saved", w.executions_saved, None, w.decisions)
        add("world", group, "not_selected", w.not_selected, None, w.predictions)
        add("world", group, "would_skip", w.would_skip, None, w.decisions)
        add("world", group, "gate_precision", w.gate_precision, None, w.gate_flagged)
        add("world", group, "gate_recall", w.gate_recall, None, w.gate_not_improved)
        add("world", group, "accuracy", w.accuracy, None, w.labelled)
        add("world", group, "brier", w.brier, None, w.labelled)
        add("world", group, "bug_brier", w.bug_brier, None, w.bug_labelled)
        for bin_ in w.bins:
            name = f"bin_{bin_.lower:.1f}_{bin_.upper:.1f}"
            add("calibration", group, f"{name}_observed", bin_.observed_rate, None, bin_.size)
            add("calibration", group, f"{name}_mean_predicted", bin_.mean_predicted, None, bin_.size)
    for x in result.whatif.rows:
        point = f"{x.stage}.threshold={x.setting.threshold:g}.min_confidence={x.setting.min_confidence:g}"
        point += f".bug_threshold={x.setting.bug_threshold:g}"
        group = ("ungated", x.configuration)
        if x.paper:
            add("whatif", group, f"{point}.paper_settings", 1)
        add("whatif", group, f"{point}.would_skip", x.would_skip, None, x.decisions)
        add("whatif", group, f"{point}.skip_share", x.skip_share, None, x.decisions)
        add("whatif", group, f"{point}.forced", x.forced, None, x.would_skip)
        add("whatif", group, f"{point}.hours_saved", x.hours_saved, None, x.would_skip)
        add("whatif", group, f"{point}.exec_hours", x.hours, None, x.decisions)
        add("whatif", group, f"{point}.improvements_lost", x.lost, None, x.improved)
        add("whatif", group, f"{point}.accuracy", x.accuracy, None, x.decisions)
        add("whatif", group, f"{point}.precision", x.precision, None, x.would_skip)
        add("whatif", group, f"{point}.recall", x.recall, None, x.not_improved)
    return rows


def summary_table(result: AuditResult) -> Table:
    return build("summary", "Summary", SUMMARY_TABLE, summary_rows(result))


def summary_csv(result: AuditResult) -> str:
    """`audit/summary.csv` text; unknown values are empty cells."""
    return csv_text(summary_table(result))


def completeness_counts(sweep: Sweep) -> dict[str, int]:
    """Expected vs found and the sizes of the problem lists."""
    return {
        "expected": len(sweep.trials),
        "found": len(sweep.found),
        "missing": len(sweep.missing),
        "superseded": len(sweep.superseded),
        "invalid": len(sweep.invalid),
        "duplicate": len(sweep.duplicates),
        "failed": len(sweep.failed),
        "unexpected": len(sweep.unexpected),
    }
