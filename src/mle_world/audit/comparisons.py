"""Paired significance of the audit's any-medal comparisons: each configuration against the baseline in
the same regime, and gated against ungated per configuration (bootstrap interval, sign test, Holm).

Reads the settled trials of a collected `Sweep` (the pairs analysis.py's deltas are over too); writes nothing.
Its `SweepView` keeps what several tables derive from a sweep's trials alike (groups, settled trials, pairs),
made once per sweep.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from operator import attrgetter, itemgetter

from mle_world.audit.collect import Sweep, Trial
from mle_world.audit.report_view import ReportView
from mle_world.audit.stats import Interval, MeanSem, holm, mean_sem, paired_bootstrap, sign_test

BASELINE = "aide"
"""The configuration every other one is compared with on the same task and seed (DESIGN §4)."""
METRIC = "any_medal"
"""The outcome every comparison tests: the report's any_medal, 0/1 per trial."""
BETWEEN_REGIMES = "gated-ungated"
"""The regime cell of a gated − ungated comparison (as in summary.csv's paired_delta section)."""


@dataclass(frozen=True)
class Comparison:
    """One paired comparison of any-medal over (task, seed) pairs where both trials are settled."""

    family: str
    """The Holm family: `<regime> vs <baseline>` per regime, or `gated vs ungated`."""
    regime: str
    """The regime both trials ran in, or `gated-ungated` for the regimes' comparison."""
    configuration: str
    against: str
    """The other side of each pair: the baseline configuration, or `ungated`."""
    pairs: int
    delta: MeanSem
    """Mean ± SEM of 100 × (this − other) over the pairs (percentage points)."""
    interval: Interval
    """Paired bootstrap 95 % interval of that mean (percentage points)."""
    better: int
    """Discordant pairs where only this side won a medal."""
    worse: int
    """Discordant pairs where only the other side won a medal."""
    p_value: float
    """Exact two-sided sign test (McNemar) of the discordant pairs."""
    p_holm: float | None
    """Holm-adjusted within the family; None outside every family (the baseline's own gated − ungated)."""
    family_size: int
    """Comparisons the family's Holm correction counts (0 outside every family)."""


Pairs = list[tuple[Trial, Trial]]
Group = tuple[str, str]


def group_trials(trials: Sequence[Trial]) -> dict[Group, list[Trial]]:
    """Trials by (regime, configuration), sorted (`analysis.groups_of`)."""
    out: dict[Group, list[Trial]] = defaultdict(list)
    for trial in trials:
        out[(trial.regime, trial.configuration)].append(trial)
    return dict(sorted(out.items()))


def _settled(trials: Sequence[Trial]) -> list[Trial]:
    return [t for t in trials if t.report is not None or t.settled_without_report]


Positions = list[tuple[int, int]]
"""Pairs of settled trials as their positions in `SweepView.settled`: the tables read each pair's numbers
from lists made in one pass over the settled trials, in their order (reading them off each pair's trials
and reports, in pair order, was 0.5 s of CPU at 100,000 reports)."""


Key = tuple[str, int]
"""(task, seed): what pairs two settled trials."""


def _positions(settled: Sequence[Trial]) -> dict[Group, dict[Key, int]]:
    """(regime, configuration) → (task, seed) → position in `settled` (a later trial of the same key
    replaces one before). The trials of a group mostly come in a run: its dict is looked up once a run."""
    out: dict[Group, dict[Key, int]] = {}
    regime = configuration = None
    by_key: dict[Key, int] = {}
    for index, trial in enumerate(settled):
        if trial.regime != regime or trial.configuration != configuration:
            regime, configuration = trial.regime, trial.configuration
            group = (regime, configuration)
            found = out.get(group)
            by_key = out[group] = {} if found is None else found
        by_key[(trial.task, trial.seed)] = index
    return out


def _regime_positions(
    positions: dict[Group, dict[Key, int]], keys: dict[Group, list[Key]]
) -> dict[str, Positions]:
    # Per configuration in order, its gated trials' keys in order that have an ungated trial: the order
    # of sorting the (configuration, task, seed) keys of the pairs.
    out: dict[str, Positions] = {}
    for cfg in sorted({cfg for _, cfg in positions}):
        gated, ungated = positions.get(("gated", cfg)), positions.get(("ungated", cfg))
        if gated is None or ungated is None:
            continue
        pairs = [(gated[key], ungated[key]) for key in keys[("gated", cfg)] if key in ungated]
        if pairs:
            out[cfg] = pairs
    return out


def _baseline_positions(
    positions: dict[Group, dict[Key, int]], keys: dict[Group, list[Key]], baseline: str
) -> dict[Group, Positions]:
    # As `_regime_positions`: per group in order, its keys in order that the baseline has in its regime.
    out: dict[Group, Positions] = {}
    for (regime, cfg), by_key in sorted(positions.items()):
        base = positions.get((regime, baseline))
        if cfg == baseline or base is None:
            continue
        pairs = [(by_key[key], base[key]) for key in keys[(regime, cfg)] if key in base]
        if pairs:
            out[(regime, cfg)] = pairs
    return out


class SweepView:
    """What several tables derive from one sweep's trials alike, each made on first use and kept.

    At 100,000 trials the tables grouped the trials 4 times, listed the settled ones 3 times and paired
    them by regime twice (about 1 s of CPU in all). Like `Sweep`'s own cached lists, this assumes the
    trials are settled once `load_sweep` returns; `view` makes a new one when the list of trials is
    replaced or changes length.
    """

    def __init__(self, trials: list[Trial]) -> None:
        self.trials = trials
        self.size = len(trials)
        self._baseline_positions: dict[str, dict[Group, Positions]] = {}
        self._indicators: dict[str, list[float]] = {}
        self._values: dict[tuple[str, ...], list[tuple[bool, ...]]] = {}

    @cached_property
    def groups(self) -> dict[Group, list[Trial]]:
        """`group_trials` of the trials."""
        return group_trials(self.trials)

    @cached_property
    def settled(self) -> list[Trial]:
        """`settled`."""
        return _settled(self.trials)

    @cached_property
    def positions(self) -> dict[Group, dict[Key, int]]:
        """Per (regime, configuration), each settled trial's position in `settled` by (task, seed)."""
        return _positions(self.settled)

    @cached_property
    def keys(self) -> dict[Group, list[Key]]:
        """Per (regime, configuration), its settled trials' (task, seed) sorted (each group's once)."""
        return {group: sorted(by_key) for group, by_key in self.positions.items()}

    @cached_property
    def regime_positions(self) -> dict[str, Positions]:
        """`regime_pairs` as positions in `settled`."""
        return _regime_positions(self.positions, self.keys)

    def baseline_positions(self, baseline: str) -> dict[Group, Positions]:
        """`baseline_pairs` against `baseline` as positions in `settled`."""
        positions = self._baseline_positions.get(baseline)
        if positions is None:
            positions = _baseline_positions(self.positions, self.keys, baseline)
            self._baseline_positions[baseline] = positions
        return positions

    def values(self, metrics: tuple[str, ...]) -> list[tuple[bool, ...]]:
        """Each settled trial's report's `metrics` (2 or more), all False without a report."""
        rows = self._values.get(metrics)
        if rows is None:
            # One getter for all: a report's metrics in one call.
            get, none = attrgetter(*metrics), (False,) * len(metrics)
            rows = [none if (report := t.report) is None else get(report) for t in self.settled]
            self._values[metrics] = rows
        return rows

    def indicators(self, *metrics: str) -> list[list[float]]:
        """Per metric, `indicator` of each settled trial; from `values` made already when they have it,
        those not made yet in one pass (0.06 s a metric at 100,000 reports one by one)."""
        missing = [m for m in dict.fromkeys(metrics) if m not in self._indicators]
        for names, rows in list(self._values.items()):
            for metric in [m for m in missing if m in names]:
                self._indicators[metric] = list(map(float, map(itemgetter(names.index(metric)), rows)))
                missing.remove(metric)
        if len(missing) == 1:
            self._indicators[missing[0]] = indicators(self.settled, missing[0])
        elif missing:
            rows = self.values(tuple(missing))
            for index, metric in enumerate(missing):
                self._indicators[metric] = list(map(float, map(itemgetter(index), rows)))
        return [self._indicators[m] for m in metrics]

    @cached_property
    def reports(self) -> list[ReportView | None]:
        """Each settled trial's report."""
        return [t.report for t in self.settled]

    def pairs(self, positions: Positions) -> Pairs:
        """The trials at `positions`."""
        settled = self.settled
        return [(settled[i], settled[j]) for i, j in positions]


def view(sweep: Sweep) -> SweepView:
    """The sweep's `SweepView`: made once, shared by the tables of one audit (kept in `sweep.derived`).

    The lists it returns are shared too: read them, never change them.
    """
    found = sweep.derived.get("view")
    if isinstance(found, SweepView) and found.trials is sweep.trials and found.size == len(sweep.trials):
        return found
    made = sweep.derived["view"] = SweepView(sweep.trials)
    return made


def settled(sweep: Sweep) -> list[Trial]:
    """Trials with a result for the rates: a grading report, or failed for good without a submission."""
    return list(view(sweep).settled)


def indicator(trial: Trial, metric: str) -> float:
    """A settled trial's 0/1 value of a rate metric; one without a report has no medal and no valid submission."""
    return float(getattr(trial.report, metric)) if trial.report is not None else 0.0


def indicators(trials: Sequence[Trial], metric: str) -> list[float]:
    """`indicator` of each trial (one getter for all: 2 function calls a trial fewer)."""
    get = attrgetter(metric)
    return [float(get(report)) if (report := t.report) is not None else 0.0 for t in trials]


def baseline_pairs(sweep: Sweep, baseline: str) -> dict[tuple[str, str], Pairs]:
    """(regime, configuration) → (its trial, the baseline's trial) per task and seed, both settled."""
    shared = view(sweep)
    return {group: shared.pairs(pairs) for group, pairs in shared.baseline_positions(baseline).items()}


def regime_pairs(sweep: Sweep) -> dict[str, Pairs]:
    """Configuration → (gated trial, ungated trial) per task and seed, both settled."""
    shared = view(sweep)
    return {cfg: shared.pairs(pairs) for cfg, pairs in shared.regime_positions.items()}


@dataclass(frozen=True)
class _Raw:
    family: str | None
    regime: str
    configuration: str
    against: str
    pairs: Positions


def _tested(raw: _Raw, values: list[float]) -> Comparison:
    """`raw` tested; `values`: each settled trial's METRIC indicator (`SweepView.indicators`)."""
    diffs = [100.0 * (values[i] - values[j]) for i, j in raw.pairs]
    # A difference's sign is the pair's comparison (exact for floats, 0 only for equal ones, NaN for none),
    # counted without a Python loop: two generators over the pairs were 0.1 s at 100,000 reports.
    better = sum(map((0.0).__lt__, diffs))
    worse = sum(map((0.0).__gt__, diffs))
    return Comparison(
        family=raw.family or "",
        regime=raw.regime,
        configuration=raw.configuration,
        against=raw.against,
        pairs=len(diffs),
        delta=mean_sem(diffs),
        interval=paired_bootstrap(diffs),
        better=better,
        worse=worse,
        p_value=sign_test(better, worse),
        p_holm=None,
        family_size=0,
    )


def compare(sweep: Sweep, baseline: str = BASELINE) -> list[Comparison]:
    """Every comparison the audit shows, Holm-corrected per family.

    A family is one regime's configurations against `baseline`, or every configuration but `baseline`
    gated against ungated: the world-model configurations, each tested once per family. The baseline's
    own gated − ungated (no world model, so no gate) is tested but belongs to no family.
    """
    shared = view(sweep)
    raws = [
        _Raw(f"{regime} vs {baseline}", regime, cfg, baseline, pairs)
        for (regime, cfg), pairs in shared.baseline_positions(baseline).items()
    ]
    for cfg, pairs in shared.regime_positions.items():
        family = None if cfg == baseline else "gated vs ungated"
        raws.append(_Raw(family, BETWEEN_REGIMES, cfg, "ungated", pairs))
    (values,) = shared.indicators(METRIC)
    out = [_tested(raw, values) for raw in raws]
    families: dict[str, list[int]] = defaultdict(list)
    for index, raw in enumerate(raws):
        if raw.family is not None:
            families[raw.family].append(index)
    for members in families.values():
        adjusted = holm([out[i].p_value for i in members])
        for i, p in zip(members, adjusted, strict=True):
            out[i] = replace(out[i], p_holm=p, family_size=len(members))
    return out


def by_group(comparisons: Sequence[Comparison]) -> dict[tuple[str, str], Comparison]:
    """(regime, configuration) → its comparison; the regime is `gated-ungated` between regimes."""
    return {(c.regime, c.configuration): c for c in comparisons}
