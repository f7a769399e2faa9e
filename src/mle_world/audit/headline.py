"""The any-medal tables: each configuration's rate per regime, its paired difference against the baseline
and gated − ungated with their bootstrap 95 % intervals and sign tests (Holm); and those tests one a row.

Reads the computed rate rows and comparisons; writes nothing (report.py and pages.py render the tables).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from mle_world.audit.analysis import RateRow
from mle_world.audit.comparisons import BETWEEN_REGIMES, Comparison, by_group
from mle_world.audit.tables import (
    Column,
    Table,
    build,
    interval,
    mean_sem,
    p_value,
    sign_tone,
    signed_mean_sem,
)

NOTE = (
    "Any-medal rate, mean ± SEM over seeds (%). Δ: paired difference over (task, seed) pairs where both "
    "trials are settled (percentage points, mean ± SEM; the number of pairs in parentheses), against "
    "{baseline} in the same regime and gated − ungated per configuration. 95 % CI: paired bootstrap of "
    "that mean (10,000 resamples of the pairs, fixed seed). p: exact two-sided sign test (McNemar) on the "
    "pairs where only one side won a medal, Holm-adjusted in parentheses within each family: one "
    "regime's configurations against {baseline}, or every configuration but {baseline} gated against "
    "ungated ({baseline}'s own gated − ungated is tested alone: –). See docs/numbers.md."
)


def _comparison_columns(
    prefix: str, delta_header: str, find: Callable[[str], Comparison | None], baseline: str | None
) -> list[Column[str]]:
    def delta(cfg: str) -> str:
        if cfg == baseline:
            return "baseline"
        c = find(cfg)
        return f"{signed_mean_sem(c.delta)} ({c.pairs})" if c else "–"

    def tone(cfg: str) -> str:
        c = find(cfg)
        return sign_tone(c.delta.mean) if c and cfg != baseline else ""

    def ci(cfg: str) -> str:
        c = find(cfg)
        return interval(c.interval) if c and cfg != baseline else ""

    def ci_tone(cfg: str) -> str:
        """Coloured when the interval leaves out 0."""
        c = find(cfg)
        if c is None or c.interval.low is None or c.interval.high is None:
            return ""
        return "pos" if c.interval.low > 0 else "neg" if c.interval.high < 0 else ""

    def p(cfg: str) -> str:
        c = find(cfg)
        if c is None or cfg == baseline:
            return ""
        return f"{p_value(c.p_value)} ({p_value(c.p_holm) if c.p_holm is not None else '–'})"

    return [
        Column(delta_header, delta, tone=tone),
        Column(f"{prefix}95 % CI", ci, tone=ci_tone),
        Column(f"{prefix}p (Holm)", p),
    ]


def headline_table(rates: Sequence[RateRow], baseline: str, comparisons: Sequence[Comparison]) -> Table:
    """Any-medal rate per configuration and regime, its paired delta against `baseline` and gated − ungated,
    with their intervals and p-values (`comparisons.compare`)."""
    rate_of = {(r.regime, r.configuration): r for r in rates}
    tested = by_group(comparisons)
    columns: list[Column[str]] = [Column("configuration", lambda cfg: cfg, left=True)]

    def regime_columns(regime: str) -> list[Column[str]]:
        def rate(cfg: str) -> str:
            row = rate_of.get((regime, cfg))
            return mean_sem(row.rates["any_medal"], 1) if row else "–"

        def seeds(cfg: str) -> str:
            row = rate_of.get((regime, cfg))
            return f"{len(row.seeds_used)}/{len(row.seeds_expected)}" if row else ""

        return [
            Column(f"{regime}: any medal %", rate),
            Column(f"{regime}: seeds", seeds),
            *_comparison_columns(
                f"{regime}: ",
                f"{regime}: Δ {baseline} (pairs)",
                lambda cfg: tested.get((regime, cfg)),
                baseline,
            ),
        ]

    for regime in sorted({r.regime for r in rates}):
        columns += regime_columns(regime)
    if any(c.regime == BETWEEN_REGIMES for c in comparisons):
        columns += _comparison_columns(
            "gated−ungated: ", "Δ gated−ungated (pairs)", lambda cfg: tested.get((BETWEEN_REGIMES, cfg)), None
        )
    configurations = sorted(sorted({r.configuration for r in rates}), key=lambda name: name != baseline)
    return build(
        "headline", "Any medal (paired Δ, bootstrap 95 % CI, sign test p (Holm))", columns, configurations
    )


COMPARISON_COLUMNS: list[Column[Comparison]] = [
    Column("regime", lambda c: c.regime, left=True),
    Column("configuration", lambda c: c.configuration, left=True),
    Column("against", lambda c: c.against, left=True),
    Column("pairs", lambda c: str(c.pairs)),
    Column("Δ any medal (pp)", lambda c: signed_mean_sem(c.delta), tone=lambda c: sign_tone(c.delta.mean)),
    Column("95 % CI", lambda c: interval(c.interval)),
    Column("medal only here/there", lambda c: f"{c.better}/{c.worse}"),
    Column("p", lambda c: p_value(c.p_value)),
    Column("p Holm", lambda c: p_value(c.p_holm) if c.p_holm is not None else "–"),
    Column("family size", lambda c: str(c.family_size) if c.family_size else "–"),
]


def comparisons_table(comparisons: Sequence[Comparison]) -> Table:
    """Each paired any-medal comparison with its discordant pairs, sign test and Holm family size."""
    title = "Any medal: paired comparisons (bootstrap 95 % CI; exact sign test, Holm within each family)"
    return build("comparisons", title, COMPARISON_COLUMNS, comparisons)
