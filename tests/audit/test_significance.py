"""The audit's paired significance maths: exact sign test (McNemar), Holm correction, paired bootstrap.

Reads nothing; writes nothing (hand-computed cases, and scipy's where it is installed).
"""

from __future__ import annotations

import itertools
from fractions import Fraction
from math import comb

import numpy as np
import pytest

from mle_world.audit.stats import BOOTSTRAP_RESAMPLES, Interval, holm, mean_sem, paired_bootstrap, sign_test


@pytest.mark.parametrize(
    ("better", "worse", "expected"),
    [
        (0, 0, Fraction(1)),  # no discordant pair: nothing to test
        (0, 1, Fraction(1)),  # 2 × 1/2, capped at 1
        (1, 1, Fraction(1)),
        (0, 5, Fraction(2, 32)),  # 2 × (1/2)^5
        (5, 0, Fraction(2, 32)),
        (1, 4, Fraction(2 * (1 + 5), 32)),
        (0, 6, Fraction(2, 64)),
        (1, 6, Fraction(2 * (1 + 7), 128)),
        (2, 8, Fraction(2 * (1 + 10 + 45), 1024)),
        (3, 3, Fraction(1)),
        (4, 3, Fraction(1)),  # the tails overlap: capped at 1
    ],
)
def test_sign_test_is_the_exact_two_sided_binomial_tail(better: int, worse: int, expected: Fraction) -> None:
    assert sign_test(better, worse) == pytest.approx(float(expected), rel=1e-15, abs=0)


def test_sign_test_is_symmetric_and_falls_as_the_split_gets_more_uneven() -> None:
    for n in range(1, 16):
        ps = [sign_test(k, n - k) for k in range(n + 1)]
        assert ps == ps[::-1]
        half = ps[: n // 2 + 1]
        assert half == sorted(half)  # more uneven (smaller k) → smaller p


def test_sign_test_is_the_math_comb_tail_at_a_large_sweeps_counts() -> None:
    """The coefficients come from a recurrence: each must still be the exact binomial one (checked
    against math.comb's sum, as the p-value was computed before) up to thousands of discordant pairs."""
    import math

    for better, worse in [(37, 211), (499, 501), (1200, 1500), (3000, 2950)]:
        n = better + worse
        tail = sum(math.comb(n, k) for k in range(min(better, worse) + 1))
        assert sign_test(better, worse) == min(1.0, 2 * tail / (1 << n)), (better, worse)
    assert 0.0 < sign_test(20_000, 21_000) < 1e-6  # 41,000 pairs: a real p-value, computed at all


def test_sign_test_rejects_negative_counts() -> None:
    with pytest.raises(ValueError):
        sign_test(-1, 3)


def test_sign_test_matches_scipy_binomtest() -> None:
    stats = pytest.importorskip("scipy.stats")
    for better, worse in itertools.product(range(21), repeat=2):
        if better + worse == 0:
            continue
        expected = stats.binomtest(better, better + worse, 0.5).pvalue
        assert sign_test(better, worse) == pytest.approx(expected, rel=1e-12), (better, worse)


def test_holm_hand_computed() -> None:
    # sorted 0.01, 0.03, 0.04, 0.2 with m = 4: 4 × 0.01 = 0.04; 3 × 0.03 = 0.09; 2 × 0.04 = 0.08 → 0.09
    # (kept monotone); 1 × 0.2 = 0.2. None is no test and does not count in m.
    assert holm([0.01, 0.04, None, 0.03, 0.2]) == pytest.approx([0.04, 0.09, None, 0.09, 0.2])
    assert holm([0.5, 0.6]) == [1.0, 1.0]  # capped at 1
    assert holm([0.02]) == [0.02]
    assert holm([None, None]) == [None, None]
    assert holm([]) == []


def test_holm_is_monotone_bounded_and_the_step_down_procedure() -> None:
    rng = np.random.default_rng(11)
    for _ in range(200):
        m = int(rng.integers(1, 8))
        raw = [float(p) for p in rng.uniform(0, 0.2, size=m)]
        adjusted = holm(raw)
        assert all(a is not None for a in adjusted)
        adj = [float(a) for a in adjusted if a is not None]
        order = sorted(range(m), key=lambda i: raw[i])
        assert [adj[i] for i in order] == sorted(adj[i] for i in order)  # the raw order is kept
        assert all(r <= a <= 1.0 for r, a in zip(raw, adj, strict=True))
        for alpha in (0.01, 0.05, 0.1):
            # Holm's step-down: reject the k smallest while p_(j) <= alpha / (m - j + 1), j = 1..k
            rejected = set()
            for rank, i in enumerate(order):
                if raw[i] > alpha / (m - rank):
                    break
                rejected.add(i)
            assert {i for i in range(m) if adj[i] <= alpha} == rejected


def test_bootstrap_of_a_degenerate_sample_is_a_point() -> None:
    assert paired_bootstrap([]) == Interval(None, None)
    assert paired_bootstrap([100.0]) == Interval(100.0, 100.0)
    assert paired_bootstrap([0.0] * 51) == Interval(0.0, 0.0)  # no discordant pair: no spread to resample
    assert paired_bootstrap([-100.0] * 7) == Interval(-100.0, -100.0)


def test_bootstrap_is_reproducible_and_its_seed_matters() -> None:
    data = [100.0] * 5 + [0.0] * 10 + [-100.0] * 2
    assert paired_bootstrap(data) == paired_bootstrap(list(reversed(data)))  # pairs, not their order
    assert paired_bootstrap(data, seed=1, resamples=200) != paired_bootstrap(data, seed=2, resamples=200)
    assert BOOTSTRAP_RESAMPLES == 10_000


def test_bootstrap_interval_of_a_known_shift_on_fixed_data() -> None:
    # 30 pairs +100, 60 ties, 10 pairs −100: mean +20 pp, SEM 6.03, so the normal interval is 20 ± 11.8
    data = [100.0] * 30 + [0.0] * 60 + [-100.0] * 10
    low, high = paired_bootstrap(data)
    assert low is not None and high is not None
    m = mean_sem(data)
    assert m.mean == 20.0 and m.sem is not None
    assert low < 20.0 < high and low > 0.0  # excludes no effect
    assert low == pytest.approx(m.mean - 1.96 * m.sem, abs=2.0)
    assert high == pytest.approx(m.mean + 1.96 * m.sem, abs=2.0)
    assert paired_bootstrap(data, level=0.5).low > low  # a narrower level gives a narrower interval


def test_bootstrap_interval_covers_a_known_shift_about_95_percent_of_the_time() -> None:
    """200 fixed samples of 60 pairs with P(+1) = .35, P(−1) = .15 (true shift +20 pp): the percentile
    interval covers +20 in 187 (93.5 %), within the binomial spread of 95 % (± 3 % at 200 samples)."""
    rng = np.random.default_rng(7)
    covered = 0
    for _ in range(200):
        sample = rng.choice([100.0, 0.0, -100.0], size=60, p=[0.35, 0.5, 0.15])
        low, high = paired_bootstrap([float(v) for v in sample], resamples=2000)
        assert low is not None and high is not None
        covered += low <= 20.0 <= high
    assert 0.90 <= covered / 200 <= 0.99


def test_bootstrap_matches_scipy_percentile_bootstrap() -> None:
    stats = pytest.importorskip("scipy.stats")
    data = np.array([100.0] * 12 + [0.0] * 30 + [-100.0] * 9)
    ours = paired_bootstrap([float(v) for v in data])
    theirs = stats.bootstrap(
        (data,), np.mean, method="percentile", n_resamples=BOOTSTRAP_RESAMPLES, random_state=5
    ).confidence_interval
    # Two RNG streams: the ends agree to within a resample grid step (100 / 51 pp) or so.
    assert ours.low == pytest.approx(theirs.low, abs=2.0)
    assert ours.high == pytest.approx(theirs.high, abs=2.0)


def test_sign_test_counts_exact_fractions_for_large_counts() -> None:
    # 30 vs 10 discordant pairs: 2 × Σ_{k<=10} C(40, k) / 2^40, exactly
    expected = Fraction(2 * sum(comb(40, k) for k in range(11)), 2**40)
    assert sign_test(30, 10) == pytest.approx(float(expected), rel=1e-15)
