"""Paired significance of the audit's any-medal comparisons: each configuration against the baseline in
the same regime, and gated against ungated per configuration (bootstrap interval, sign test, Holm).

Reads the settled trials of a collected `Sweep` (the pairs analysis.py's deltas are over too); writes nothing.
Its `SweepView` keeps what several tables derive from a sweep's trials alike (groups, settled trials, pairs),
made once per sweep.
"""

from __future__ import annotations

import weakref
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from operator import attrgetter

from mle_world.audit.collect import Sweep, Trial
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


def _regime_positions(settled: Sequence[Trial]) -> dict[str, Positions]:
    # By configuration first, then (task, seed): the order of sorting (configuration, task, seed)
    # triples, with fewer and shorter keys to sort (a later trial of the same key replaces one before).
    by_cfg: dict[str, dict[tuple[str, int], dict[str, int]]] = {}
    for index, trial in enumerate(settled):
        by_key = by_cfg.get(trial.configuration)
        if by_key is None:
            by_key = by_cfg[trial.configuration] = {}
        key = (trial.task, trial.seed)
        regimes = by_key.get(key)
        if regimes is None:
            by_key[key] = {trial.regime: index}
        else:
            regimes[trial.regime] = index
    out: dict[str, Positions] = {}
    for cfg in sorted(by_cfg):
        by_key = by_cfg[cfg]
        pairs = [
            (regimes["gated"], regimes["ungated"])
            for regimes in map(by_key.__getitem__, sorted(by_key))
            if "gated" in regimes and "ungated" in regimes
        ]
        if pairs:
            out[cfg] = pairs
    return out


def _baseline_positions(settled: Sequence[Trial], baseline: str) -> dict[Group, Positions]:
    # As `_regime_positions`: by regime, then (task, seed); each configuration's list is filled in key
    # order whatever order a key's configurations come in, so they need no sorting of their own.
    by_regime: dict[str, dict[tuple[str, int], dict[str, int]]] = {}
    for index, trial in enumerate(settled):
        by_key = by_regime.get(trial.regime)
        if by_key is None:
            by_key = by_regime[trial.regime] = {}
        key = (trial.task, trial.seed)
        configs = by_key.get(key)
        if configs is None:
            by_key[key] = {trial.configuration: index}
        else:
            configs[trial.configuration] = index
    out: dict[Group, Positions] = {}
    for regime in sorted(by_regime):
        by_key = by_regime[regime]
        for configs in map(by_key.__getitem__, sorted(by_key)):
            base = configs.get(baseline)
            if base is None:
                continue
            for cfg, index in configs.items():
                if cfg != baseline:
                    pairs = out.get((regime, cfg))
                    if pairs is None:
                        out[(regime, cfg)] = [(index, base)]
                    else:
                        pairs.append((index, base))
    return dict(sorted(out.items()))


Score = tuple[float | None, bool]
"""A report's score and whether lower is better (`compare_trials`)."""


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

    @cached_property
    def groups(self) -> dict[Group, list[Trial]]:
        """`group_trials` of the trials."""
        return group_trials(self.trials)

    @cached_property
    def settled(self) -> list[Trial]:
        """`settled`."""
        return _settled(self.trials)

    @cached_property
    def regime_positions(self) -> dict[str, Positions]:
        """`regime_pairs` as positions in `settled`."""
        return _regime_positions(self.settled)

    def baseline_positions(self, baseline: str) -> dict[Group, Positions]:
        """`baseline_pairs` against `baseline` as positions in `settled`."""
        positions = self._baseline_positions.get(baseline)
        if positions is None:
            positions = self._baseline_positions[baseline] = _baseline_positions(self.settled, baseline)
        return positions

    def indicators(self, metric: str) -> list[float]:
        """`indicator` of each settled trial."""
        values = self._indicators.get(metric)
        if values is None:
            values = self._indicators[metric] = indicators(self.settled, metric)
        return values

    @cached_property
    def scores(self) -> list[Score | None]:
        """Each settled trial's report's `Score`; None without a report."""
        return [
            None if (report := t.report) is None else (report.score, report.is_lower_better)
            for t in self.settled
        ]

    def pairs(self, positions: Positions) -> Pairs:
        """The trials at `positions`."""
        settled = self.settled
        return [(settled[i], settled[j]) for i, j in positions]


_VIEWS: dict[int, tuple[weakref.ref[Sweep], SweepView]] = {}
"""By id(sweep) (a Sweep is no dict key: it compares by value); dropped when the sweep is freed."""


def view(sweep: Sweep) -> SweepView:
    """The sweep's `SweepView`: made once, shared by the tables of one audit.

    The lists it returns are shared too: read them, never change them.
    """
    entry = _VIEWS.get(id(sweep))
    if entry is not None:
        known, found = entry
        if known() is sweep and found.trials is sweep.trials and found.size == len(sweep.trials):
            return found
    if entry is None or entry[0]() is not sweep:
        weakref.finalize(sweep, _VIEWS.pop, id(sweep), None)
    made = SweepView(sweep.trials)
    _VIEWS[id(sweep)] = (weakref.ref(sweep), made)
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
    better = sum(1 for i, j in raw.pairs if values[i] > values[j])
    worse = sum(1 for i, j in raw.pairs if values[i] < values[j])
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
    values = shared.indicators(METRIC)
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
