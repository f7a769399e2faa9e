"""Audit tables computed from a collected sweep: medal rates, paired deltas, costs, world model.

Reads the `Sweep` built by `collect.load_sweep` (and events/journals through it); writes nothing.

Longer than 400 lines because every paper table's rows come from the same collected trials here; the
budget and world-model tables are the ones to move into modules of their own.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from mle_world.audit.collect import Sweep, Trial, trial_predictions
from mle_world.audit.comparisons import Comparison, Group, group_trials, view
from mle_world.audit.journals import journal_summary
from mle_world.audit.predictions import PredictionLine
from mle_world.audit.report_view import ReportView
from mle_world.audit.stats import (
    CalibrationBin,
    MeanSem,
    accuracy_at,
    brier_score,
    calibration_bins,
    compare_scores,
    mean_sem,
)
from mle_world.audit.whatif import WhatIf
from mle_world.records import improves

RATE_METRICS: tuple[str, ...] = (
    "valid_submission",
    "any_medal",
    "gold_medal",
    "silver_medal",
    "bronze_medal",
    "above_median",
)
DELTA_METRICS: tuple[str, ...] = ("any_medal", "above_median", "valid_submission")
LABELS = {
    "valid_submission": "valid %",
    "any_medal": "any medal %",
    "gold_medal": "gold %",
    "silver_medal": "silver %",
    "bronze_medal": "bronze %",
    "above_median": "above median %",
}


def groups_of(trials: Sequence[Trial]) -> dict[Group, list[Trial]]:
    """Trials by (regime, configuration), sorted (a sweep's own: `comparisons.view(sweep).groups`)."""
    return group_trials(trials)


@dataclass
class RateRow:
    """Rates of one regime x configuration, as mean ± SEM over seeds (percent)."""

    regime: str
    configuration: str
    tasks: int
    seeds_expected: list[int]
    seeds_used: list[int]
    rates: dict[str, MeanSem]


def rate_rows(sweep: Sweep, pad_missing: bool) -> list[RateRow]:
    """Per regime x configuration: complete seeds only, or with --pad-missing every seed with a result
    for some task, its missing tasks counted as failures.

    Seeds are aligned by their number (seed 35 of every task), not by report order as MLE-bench's
    aggregation does. A trial that failed for good without leaving a submission is settled: it
    counts as no medal (and no valid submission) for its seed instead of dropping the seed; a
    failed trial that left a submission has a grading report like any other.
    """
    rows = []
    shared = view(sweep)
    values = shared.values(RATE_METRICS)
    for (regime, cfg), trials in shared.groups.items():
        tasks = sorted({t.task for t in trials})
        seeds = sorted({t.seed for t in trials})
        # Seed → the RATE_METRICS of each task's settled trial (`SweepView.positions`: one a task and
        # seed, the last); the tasks a seed has are its `present` ones.
        results: dict[int, list[tuple[bool, ...]]] = {}
        for (_, seed), index in shared.positions.get((regime, cfg), {}).items():
            found = results.get(seed)
            if found is None:
                results[seed] = [values[index]]
            else:
                found.append(values[index])
        # --pad-missing: a seed counts once any task has a result for it, as MLE-bench pads up to the
        # largest number of reports a competition has (a seed that has not run yet is no seed of zeros).
        # Every present task is one of `tasks`: a seed has them all when it has as many.
        used = [s for s in seeds if (s in results if pad_missing else len(results.get(s, ())) == len(tasks))]
        per_metric = _seed_rates(results, tasks, used)
        rates = {m: mean_sem(per_seed) for m, per_seed in zip(RATE_METRICS, per_metric, strict=True)}
        rows.append(RateRow(regime, cfg, len(tasks), seeds, used, rates))
    return rows


def _seed_rates(
    results: dict[int, list[tuple[bool, ...]]], tasks: Sequence[str], seeds: Sequence[int]
) -> list[list[float]]:
    """Per rate metric, `stats.seed_rates` of `results` (each seed's metrics counted in one pass)."""
    if not tasks:
        return [[] for _ in RATE_METRICS]
    per_metric: list[list[float]] = [[] for _ in RATE_METRICS]
    for seed in seeds:
        found = results.get(seed)
        counts = [sum(column) for column in zip(*found, strict=True)] if found else None
        for i, per_seed in enumerate(per_metric):
            # As seed_rates: 100 × (an int count of the true ones) / tasks; an absent task counts as 0.
            per_seed.append(100.0 * (counts[i] if counts else 0) / len(tasks))
    return per_metric


@dataclass
class DeltaRow:
    """Gated − ungated on the same task and seed, for one configuration (percentage points)."""

    configuration: str
    pairs: int
    deltas: dict[str, MeanSem]
    gated_better: int
    gated_worse: int
    ties: int


def _compare(gated: ReportView | None, ungated: ReportView | None) -> int:
    """`stats.compare_scores` of two settled trials' reports: one without a report has no score (it loses),
    and the direction is the first report's."""
    if gated is not None:
        return compare_scores(
            gated.score, ungated.score if ungated is not None else None, gated.is_lower_better
        )
    if ungated is not None:
        return compare_scores(None, ungated.score, ungated.is_lower_better)
    return compare_scores(None, None, False)


def delta_rows(sweep: Sweep) -> list[DeltaRow]:
    """Paired deltas over (task, seed) pairs where both regimes are settled (see `comparisons.settled`)."""
    rows = []
    shared = view(sweep)
    values = dict(zip(DELTA_METRICS, shared.indicators(*DELTA_METRICS), strict=True))
    reports = shared.reports
    for cfg, pairs in shared.regime_positions.items():
        deltas = {}
        for metric in DELTA_METRICS:
            indicator = values[metric]
            deltas[metric] = mean_sem([100.0 * (indicator[g] - indicator[u]) for g, u in pairs])
        outcomes = [_compare(reports[g], reports[u]) for g, u in pairs]
        rows.append(
            DeltaRow(cfg, len(pairs), deltas, outcomes.count(1), outcomes.count(-1), outcomes.count(0))
        )
    return rows


@dataclass
class CostTableRow:
    """Cost per trial and per medal of one regime x configuration (trials with fully known cost)."""

    regime: str
    configuration: str
    trials: int
    with_costs: int
    cost_known: int
    cost_per_trial: MeanSem
    total_cost: float | None
    medals: int
    cost_per_medal: float | None
    tokens_per_trial: float | None
    gpu_hours_per_trial: float | None
    tokens_known: int = 0
    """Trials whose tokens/trial is averaged: cost rows with every role's usage known."""
    gpu_known: int = 0
    """Trials whose GPU-hours/trial is averaged: cost rows with the executions' GPU-hours known."""


def cost_rows(sweep: Sweep) -> list[CostTableRow]:
    """Cost per trial (mean ± SEM over trials with known cost) and total known cost / medals."""
    rows = []
    for (regime, cfg), trials in view(sweep).groups.items():
        # One pass over the trials, each list in their order (5 passes were 0.1 s at 100,000 reports).
        with_costs = medals = 0
        costs: list[float] = []
        tokens: list[int] = []
        gpu: list[float] = []
        for t in trials:
            # A trial being rerun has the cost CSV of its earlier attempts only: left out until the rerun ends.
            if not t.has_costs or t.rerunning:
                continue
            with_costs += 1
            if t.cost_known and t.cost_usd is not None:
                costs.append(t.cost_usd)
                if t.report is not None and t.report.any_medal:
                    medals += 1
            if t.tokens is not None:
                tokens.append(t.tokens)
            if t.gpu_hours is not None:
                gpu.append(t.gpu_hours)
        total = sum(costs) if costs else None
        rows.append(
            CostTableRow(
                regime=regime,
                configuration=cfg,
                trials=len(trials),
                with_costs=with_costs,
                cost_known=len(costs),
                cost_per_trial=mean_sem(costs),
                total_cost=total,
                medals=medals,
                cost_per_medal=total / medals if total is not None and medals else None,
                tokens_per_trial=sum(tokens) / len(tokens) if tokens else None,
                gpu_hours_per_trial=sum(gpu) / len(gpu) if gpu else None,
                tokens_known=len(tokens),
                gpu_known=len(gpu),
            )
        )
    return rows


@dataclass
class BudgetRow:
    """How the trials of one regime x configuration used and ended their budget (from result.json)."""

    regime: str
    configuration: str
    trials: int
    with_result: int
    stopped: dict[str, int]
    """Trials per stop: max_steps, time_limit, failed (any other reason)."""
    executed: MeanSem
    """Executed nodes per trial (what the step limit counts)."""
    steps: MeanSem
    """Loop steps per trial (one per parent chosen; vetoed steps included)."""
    consulted_steps: int
    vetoed_steps: int
    not_selected: int
    direction_from_task: int
    direction_disagreements: int
    metric_mismatches: int
    context_overflows: int


def budget_rows(sweep: Sweep) -> list[BudgetRow]:
    """Which limit stopped each trial, executions and steps, and the agent's data-quality counters."""
    rows = []
    for (regime, cfg), trials in view(sweep).groups.items():
        results = [t.result for t in trials if t.result is not None]
        stopped = {"max_steps": 0, "time_limit": 0, "failed": 0}
        for result in results:
            if result.status == "completed" and result.stop_reason in ("max_steps", "time_limit"):
                stopped[result.stop_reason] += 1
            else:
                stopped["failed"] += 1
        rows.append(
            BudgetRow(
                regime=regime,
                configuration=cfg,
                trials=len(trials),
                with_result=len(results),
                stopped=stopped,
                executed=mean_sem([float(r.executed) for r in results]),
                steps=mean_sem([float(r.steps) for r in results]),
                consulted_steps=sum(r.consulted_steps for r in results),
                vetoed_steps=sum(r.vetoed_steps for r in results),
                not_selected=sum(r.not_selected for r in results),
                direction_from_task=sum(r.direction_source == "task" for r in results),
                direction_disagreements=sum(r.direction_disagreements for r in results),
                metric_mismatches=sum(r.metric_mismatches for r in results),
                context_overflows=sum(r.context_overflows for r in results),
            )
        )
    return rows


@dataclass
class WorldRow:
    """World-model statistics of one regime x configuration (or 'all' ungated)."""

    regime: str
    configuration: str
    predictions: int = 0
    invalid: int = 0
    decisions: int = 0
    """Steps on which the world model was consulted (one gate decision each)."""
    skipped: int = 0
    """Vetoed steps: the best-ranked candidate was rejected and nothing ran (= executions saved)."""
    forced: int = 0
    not_selected: int = 0
    """Candidates of multi-candidate steps that lost the ranking: not skips, never counted as such."""
    would_skip: int = 0
    """Ungated: steps the gate would have vetoed (the counterfactual decision)."""
    gate_precision: float | None = None
    """Ungated: of executed candidates the gate would not have run, the share that did not improve."""
    gate_recall: float | None = None
    """Ungated: of executed candidates that did not improve, the share the gate would not have run."""
    gate_flagged: int = 0
    """Ungated: executed candidates the gate would not have run (gate precision's denominator)."""
    gate_not_improved: int = 0
    """Ungated: executed candidates with a counterfactual decision that did not improve (recall's)."""
    labelled: int = 0
    accuracy: float | None = None
    brier: float | None = None
    bug_labelled: int = 0
    bug_brier: float | None = None
    bins: list[CalibrationBin] = field(default_factory=list)
    bad_event_lines: int = 0

    @property
    def skip_rate(self) -> float | None:
        """Vetoed steps / consulted steps (gated only); not-selected candidates are not skips."""
        return self.skipped / self.decisions if self.decisions and self.regime == "gated" else None

    @property
    def executions_saved(self) -> int:
        return self.skipped


def world_rows(sweep: Sweep, n_bins: int = 10) -> list[WorldRow]:
    """Gate skip rate (gated) and, from ungated trials, accuracy/Brier/calibration of p_improves; then the
    ungated configurations pooled ('all')."""
    rows = []
    pooled = _WorldData()
    pooled_row = WorldRow("ungated", "all")
    for (regime, cfg), trials in view(sweep).groups.items():
        row = WorldRow(regime, cfg)
        data = _WorldData()
        predictions: list[PredictionLine] = []
        for trial in trials:
            events = trial.predictions_cache
            if events is None:
                events = trial_predictions(trial)
            row.bad_event_lines += events.bad_lines
            predictions += events.predictions
        _count_predictions(row, data, predictions, calibrated=regime == "ungated")
        if row.predictions == 0:
            continue
        _finish(row, data, n_bins)
        rows.append(row)
        if regime == "ungated":
            pooled.extend(data)
            for name in _POOLED_COUNTS:
                setattr(pooled_row, name, getattr(pooled_row, name) + getattr(row, name))
    if pooled.probs:
        _finish(pooled_row, pooled, n_bins)
        rows.append(pooled_row)
    return rows


_POOLED_COUNTS = ("predictions", "invalid", "decisions", "not_selected", "would_skip", "bad_event_lines")
"""The ungated rows' counts the pooled 'all' row sums (ungated steps veto and force nothing)."""


@dataclass
class _WorldData:
    """What one world row's statistics come from."""

    probs: list[float] = field(default_factory=list)
    outcomes: list[bool] = field(default_factory=list)
    bug_p: list[float] = field(default_factory=list)
    bug_y: list[bool] = field(default_factory=list)
    # Executed candidates with a counterfactual decision: those the gate would not have run (flagged),
    # those that did not improve (worse), and those both (gate precision's and recall's numerator).
    flagged: int = 0
    worse: int = 0
    flagged_worse: int = 0

    def extend(self, other: _WorldData) -> None:
        self.probs += other.probs
        self.outcomes += other.outcomes
        self.bug_p += other.bug_p
        self.bug_y += other.bug_y
        self.flagged += other.flagged
        self.worse += other.worse
        self.flagged_worse += other.flagged_worse


def _count_predictions(
    row: WorldRow, data: _WorldData, predictions: Iterable[PredictionLine], calibrated: bool
) -> None:
    """Count `predictions` into `row` and `data`: one loop over unpacked lines, its counts in locals
    (a function call and 10 attribute reads a prediction were 0.6 s of CPU at 100,000 reports)."""
    count = invalid = not_selected = decisions = skipped = forced = would_skip = 0
    flagged = worse = flagged_worse = 0
    probs, outcomes, bug_p, bug_y = data.probs, data.outcomes, data.bug_p, data.bug_y
    for (
        _stage,
        _mode,
        valid,
        gate,
        executed,
        counterfactual_gate,
        p_improves,
        p_bug,
        actual_improved,
        actual_buggy,
    ) in predictions:
        count += 1
        if not valid:
            invalid += 1
        # One decision per consulted step: every label but "not_selected" marks one.
        if gate == "not_selected":
            not_selected += 1
        else:
            decisions += 1
            if gate == "skip":
                skipped += 1
            elif gate == "forced":
                forced += 1
        # The counterfactual veto falls on the step's best-ranked candidate, which an ungated step with
        # several candidates may not have run (then its own label is not_selected).
        if counterfactual_gate == "skip":
            would_skip += 1
        if executed and counterfactual_gate is not None and actual_improved is not None:
            # Would the gated regime have left this node unrun (vetoed, or ranked below another)?
            if counterfactual_gate != "execute":
                flagged += 1
                if not actual_improved:
                    worse += 1
                    flagged_worse += 1
            elif not actual_improved:
                worse += 1
        if not calibrated or not valid or not executed:
            continue
        if p_improves is not None and actual_improved is not None:
            probs.append(p_improves)
            outcomes.append(actual_improved)
        if p_bug is not None and actual_buggy is not None:
            bug_p.append(p_bug)
            bug_y.append(actual_buggy)
    row.predictions += count
    row.invalid += invalid
    row.not_selected += not_selected
    row.decisions += decisions
    row.skipped += skipped
    row.forced += forced
    row.would_skip += would_skip
    data.flagged += flagged
    data.worse += worse
    data.flagged_worse += flagged_worse


def world_row(
    regime: str, configuration: str, predictions: Iterable[PredictionLine], n_bins: int = 10
) -> WorldRow:
    """One row of `world_rows` from predictions of any source (replay scores a replayed world model so)."""
    row = WorldRow(regime, configuration)
    data = _WorldData()
    _count_predictions(row, data, predictions, calibrated=regime == "ungated")
    _finish(row, data, n_bins)
    return row


def _finish(row: WorldRow, data: _WorldData, n_bins: int) -> None:
    row.gate_precision = data.flagged_worse / data.flagged if data.flagged else None
    row.gate_recall = data.flagged_worse / data.worse if data.worse else None
    row.gate_flagged, row.gate_not_improved = data.flagged, data.worse
    row.labelled, row.accuracy, row.brier = (
        len(data.probs),
        accuracy_at(data.probs, data.outcomes),
        brier_score(data.probs, data.outcomes),
    )
    row.bug_labelled, row.bug_brier = len(data.bug_p), brier_score(data.bug_p, data.bug_y)
    row.bins = calibration_bins(data.probs, data.outcomes, n_bins) if data.probs else []


@dataclass
class Curve:
    """Mean normalised best-so-far metric of one regime x configuration over time."""

    regime: str
    configuration: str
    trials: int
    times: list[float]
    values: list[float]


def best_metric_curves(sweep: Sweep, points: int = 60) -> list[Curve]:
    """Per trial best-so-far journal metric, min-max normalised per task (1 = best seen), averaged.

    A trial whose journal has nodes but never a good one counts as 0 throughout, as every trial does
    before its first good node; a trial without a journal is left out.
    """
    raw: dict[str, tuple[Trial, list[tuple[float, float]], bool]] = {}
    never_good: list[Trial] = []
    for trial in sweep.trials:
        summary = journal_summary(trial)  # kept on the trial (its absence too, which is most of them)
        if summary.curve:
            raw[trial.trial_id] = (trial, summary.curve, bool(summary.lower))
        elif summary.has_nodes:
            never_good.append(trial)
    if not raw:
        return []
    bounds: dict[str, tuple[float, float]] = {}
    for trial, curve, _ in raw.values():
        lo, hi = bounds.get(trial.task, (float("inf"), float("-inf")))
        metrics = [m for _, m in curve]
        bounds[trial.task] = (min(lo, *metrics), max(hi, *metrics))
    horizon = max(t for _, curve, _ in raw.values() for t, _ in curve) or 1.0
    grid = [horizon * i / (points - 1) for i in range(points)]
    sums: dict[Group, list[float]] = {}
    counts: dict[Group, int] = defaultdict(int)
    for trial, curve, lower in raw.values():
        lo, hi = bounds[trial.task]
        span = hi - lo
        values = []
        best: float | None = None
        index = 0
        for t in grid:
            while index < len(curve) and curve[index][0] <= t:
                m = curve[index][1]
                best = m if improves(m, best, lower) else best
                index += 1
            if best is None:
                values.append(0.0)
            elif span == 0:
                values.append(1.0)
            else:
                values.append((hi - best) / span if lower else (best - lo) / span)
        key = (trial.regime, trial.configuration)
        acc = sums.setdefault(key, [0.0] * points)
        for i, v in enumerate(values):
            acc[i] += v
        counts[key] += 1
    for trial in never_good:
        key = (trial.regime, trial.configuration)
        sums.setdefault(key, [0.0] * points)
        counts[key] += 1
    return [
        Curve(regime, cfg, counts[(regime, cfg)], grid, [v / counts[(regime, cfg)] for v in acc])
        for (regime, cfg), acc in sorted(sums.items())
    ]


@dataclass
class BaselineDeltaRow:
    """A configuration − the baseline configuration on the same regime, task and seed (percentage points)."""

    regime: str
    configuration: str
    baseline: str
    pairs: int
    delta: MeanSem


def baseline_delta_rows(
    sweep: Sweep, baseline: str = "aide", metric: str = "any_medal"
) -> list[BaselineDeltaRow]:
    """Paired deltas against `baseline` within each regime, over (task, seed) pairs where both are settled."""
    rows = []
    shared = view(sweep)
    (indicator,) = shared.indicators(metric)
    for (regime, cfg), pairs in shared.baseline_positions(baseline).items():
        values = [100.0 * (indicator[trial] - indicator[base]) for trial, base in pairs]
        rows.append(BaselineDeltaRow(regime, cfg, baseline, len(values), mean_sem(values)))
    return rows


@dataclass
class CalibrationRow:
    """Calibration of executed, valid ungated predictions of one stage and mode."""

    stage: str
    mode: str
    labelled: int
    accuracy: float | None
    brier: float | None
    bug_labelled: int
    bug_brier: float | None
    bins: list[CalibrationBin]


def calibration_rows(sweep: Sweep, n_bins: int = 10) -> list[CalibrationRow]:
    """p_improves (and p_bug) against the observed outcome per stage and mode, from ungated trials."""
    predictions: list[PredictionLine] = []
    for trial in sweep.trials:
        if trial.regime == "ungated":
            events = trial.predictions_cache
            predictions += (events if events is not None else trial_predictions(trial)).predictions
    return calibration_of(predictions, n_bins)


def calibration_of(predictions: Iterable[PredictionLine], n_bins: int = 10) -> list[CalibrationRow]:
    """`calibration_rows` of any ungated predictions (a replayed world model's too)."""
    improves: dict[tuple[str, str], tuple[list[float], list[bool]]] = defaultdict(lambda: ([], []))
    bugs: dict[tuple[str, str], tuple[list[float], list[bool]]] = defaultdict(lambda: ([], []))
    # Unpacked in the loop, as `_count_predictions` (an attribute read a field was 0.2 s at 100,000 reports).
    for stage, mode, valid, _, executed, _, p_improves, p_bug, actual_improved, actual_buggy in predictions:
        if not valid or not executed:
            continue
        key: tuple[str, str] = (stage, mode)
        if p_improves is not None and actual_improved is not None:
            probs, outcomes = improves[key]
            probs.append(p_improves)
            outcomes.append(actual_improved)
        if p_bug is not None and actual_buggy is not None:
            probs, outcomes = bugs[key]
            probs.append(p_bug)
            outcomes.append(actual_buggy)
    rows = []
    for group in sorted(set(improves) | set(bugs)):
        probs, outcomes = improves.get(group, ([], []))
        bug_p, bug_y = bugs.get(group, ([], []))
        rows.append(
            CalibrationRow(
                stage=group[0],
                mode=group[1],
                labelled=len(probs),
                accuracy=accuracy_at(probs, outcomes),
                brier=brier_score(probs, outcomes),
                bug_labelled=len(bug_p),
                bug_brier=brier_score(bug_p, bug_y),
                bins=calibration_bins(probs, outcomes, n_bins) if probs else [],
            )
        )
    return rows


@dataclass
class AuditResult:
    """Everything the audit computed."""

    sweep: Sweep
    rates: list[RateRow]
    deltas: list[DeltaRow]
    costs: list[CostTableRow]
    world: list[WorldRow]
    curves: list[Curve]
    pad_missing: bool
    budgets: list[BudgetRow] = field(default_factory=list)
    calibration: list[CalibrationRow] | None = None
    """Calibration per stage and mode (`calibration_rows`), when computed already."""
    comparisons: list[Comparison] = field(default_factory=list)
    """Paired any-medal tests against the baseline and between the regimes (`comparisons.compare`)."""
    whatif: WhatIf = field(default_factory=WhatIf)
    """The what-if gates of the ungated trials (`whatif.whatif_rows`)."""

    def calibration_per_stage(self) -> list[CalibrationRow]:
        if self.calibration is None:
            self.calibration = calibration_rows(self.sweep)
        return self.calibration
