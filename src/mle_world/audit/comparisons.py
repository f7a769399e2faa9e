"""Paired significance of the audit's any-medal comparisons: each configuration against the baseline in
the same regime, and gated against ungated per configuration (bootstrap interval, sign test, Holm).

Reads the settled trials of a collected `Sweep` (the pairs analysis.py's deltas are over too); writes nothing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace

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


def settled(sweep: Sweep) -> list[Trial]:
    """Trials with a result for the rates: a grading report, or failed for good without a submission."""
    return [t for t in sweep.trials if t.report is not None or t.settled_without_report]


def indicator(trial: Trial, metric: str) -> float:
    """A settled trial's 0/1 value of a rate metric; one without a report has no medal and no valid submission."""
    return float(getattr(trial.report, metric)) if trial.report is not None else 0.0


def baseline_pairs(sweep: Sweep, baseline: str) -> dict[tuple[str, str], Pairs]:
    """(regime, configuration) → (its trial, the baseline's trial) per task and seed, both settled."""
    by_key: dict[tuple[str, str, int], dict[str, Trial]] = defaultdict(dict)
    for trial in settled(sweep):
        by_key[(trial.regime, trial.task, trial.seed)][trial.configuration] = trial
    out: dict[tuple[str, str], Pairs] = defaultdict(list)
    for (regime, _, _), configs in sorted(by_key.items()):
        base = configs.get(baseline)
        if base is not None:
            for cfg, trial in sorted(configs.items()):
                if cfg != baseline:
                    out[(regime, cfg)].append((trial, base))
    return dict(sorted(out.items()))


def regime_pairs(sweep: Sweep) -> dict[str, Pairs]:
    """Configuration → (gated trial, ungated trial) per task and seed, both settled."""
    by_key: dict[tuple[str, str, int], dict[str, Trial]] = defaultdict(dict)
    for trial in settled(sweep):
        by_key[(trial.configuration, trial.task, trial.seed)][trial.regime] = trial
    out: dict[str, Pairs] = defaultdict(list)
    for (cfg, _, _), regimes in sorted(by_key.items()):
        if "gated" in regimes and "ungated" in regimes:
            out[cfg].append((regimes["gated"], regimes["ungated"]))
    return dict(sorted(out.items()))


@dataclass(frozen=True)
class _Raw:
    family: str | None
    regime: str
    configuration: str
    against: str
    pairs: Pairs


def _tested(raw: _Raw) -> Comparison:
    values = [(indicator(a, METRIC), indicator(b, METRIC)) for a, b in raw.pairs]
    diffs = [100.0 * (a - b) for a, b in values]
    better = sum(1 for a, b in values if a > b)
    worse = sum(1 for a, b in values if a < b)
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
    raws = [
        _Raw(f"{regime} vs {baseline}", regime, cfg, baseline, pairs)
        for (regime, cfg), pairs in baseline_pairs(sweep, baseline).items()
    ]
    for cfg, pairs in regime_pairs(sweep).items():
        family = None if cfg == baseline else "gated vs ungated"
        raws.append(_Raw(family, BETWEEN_REGIMES, cfg, "ungated", pairs))
    out = [_tested(raw) for raw in raws]
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
