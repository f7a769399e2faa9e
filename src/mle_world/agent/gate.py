"""The gate of DESIGN §4: which of a step's candidates runs, given the world model's verdicts.

Pure functions over predictions/comparisons and the settings; draws only from the RNG passed in.

Semantics:
- pointwise: a candidate is *rejected* when its prediction is valid, confidence >= min_confidence
  and (p_improves < threshold or p_bug >= bug_threshold). Invalid predictions never reject (fail
  open). With k candidates they are ranked by p_improves (ties: predicted_metric in the task's
  direction, then generation order; invalid predictions rank last) and only the best is considered.
- pairwise: a single-elimination tournament in generation order (odd one out gets a bye); a match
  counts only when valid with confidence >= pairwise_confidence, otherwise the first by order
  advances. The winner is then compared with the best node so far (A = best, B = winner) when one
  exists, and is rejected when the best confidently wins.
- gated regime: a rejected best candidate is skipped with all the others; after
  max_consecutive_skips fully skipped steps in a row it is executed anyway (gate "forced").
  When it is accepted it runs (gate "execute") and the others are skipped.
- ungated regime: same calls, labels "not_gated"; one candidate runs, chosen by the seeded RNG when
  there are several.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mle_world.agent.journal import GateLabel
from mle_world.agent.world import Comparison, Prediction
from mle_world.records import Regime, WorldModelSettings


@dataclass(frozen=True)
class GateOutcome:
    chosen: int | None
    """Index of the candidate to execute; None when the whole step is skipped."""
    labels: tuple[GateLabel, ...]
    ranks: tuple[int, ...]
    rejected: bool
    """Whether the best-ranked candidate was rejected by the world model."""


@dataclass(frozen=True)
class Match:
    a: int
    b: int
    comparison: Comparison
    winner: int
    counted: bool


@dataclass(frozen=True)
class Tournament:
    winner: int
    ranks: tuple[int, ...]
    matches: tuple[Match, ...]


def rejects(prediction: Prediction, settings: WorldModelSettings) -> bool:
    if not prediction.valid or prediction.confidence is None:
        return False
    if prediction.confidence < settings.min_confidence:
        return False
    p_improves = prediction.p_improves if prediction.p_improves is not None else 1.0
    p_bug = prediction.p_bug if prediction.p_bug is not None else 0.0
    return p_improves < settings.threshold or p_bug >= settings.bug_threshold


def rank_pointwise(predictions: Sequence[Prediction], lower_is_better: bool | None) -> list[int]:
    """Candidate indices best first."""
    sign = 1.0 if lower_is_better else -1.0

    def key(i: int) -> tuple[int, float, float, int]:
        p = predictions[i]
        if not p.valid or p.p_improves is None:
            return (1, 0.0, 0.0, i)
        metric = sign * p.predicted_metric if p.predicted_metric is not None else float("inf")
        return (0, -p.p_improves, metric, i)

    return sorted(range(len(predictions)), key=key)


def counts(comparison: Comparison, min_confidence: float) -> bool:
    return comparison.valid and comparison.confidence is not None and comparison.confidence >= min_confidence


def tournament(
    n: int,
    compare_round: Callable[[list[tuple[int, int]]], list[Comparison]],
    min_confidence: float,
) -> Tournament:
    """Single elimination; `compare_round` gets all pairs of a round at once (to run them concurrently)."""
    active = list(range(n))
    eliminated_at: dict[int, int] = {}
    matches: list[Match] = []
    round_no = 0
    while len(active) > 1:
        pairs = [(active[i], active[i + 1]) for i in range(0, len(active) - 1, 2)]
        results = compare_round(pairs)
        advancing = []
        for (a, b), comparison in zip(pairs, results, strict=True):
            counted = counts(comparison, min_confidence)
            winner = b if counted and comparison.better == "B" else a
            loser = b if winner == a else a
            eliminated_at[loser] = round_no
            advancing.append(winner)
            matches.append(Match(a, b, comparison, winner, counted))
        if len(active) % 2:
            advancing.append(active[-1])
        active = advancing
        round_no += 1
    winner = active[0] if active else 0
    ranks = tuple(0 if i == winner else round_no - eliminated_at.get(i, round_no - 1) for i in range(n))
    return Tournament(winner=winner, ranks=ranks, matches=tuple(matches))


def pairwise_rejects(vs_best: Comparison | None, settings: WorldModelSettings) -> bool:
    """A = the best node so far, B = the tournament winner."""
    return vs_best is not None and counts(vs_best, settings.pairwise_confidence) and vs_best.better == "A"


def decide(
    *,
    order: Sequence[int],
    rejected: bool,
    regime: Regime,
    consecutive_skips: int,
    settings: WorldModelSettings,
    rng: random.Random,
) -> GateOutcome:
    k = len(order)
    ranks = tuple(order.index(i) for i in range(k))
    if regime == "ungated":
        chosen = rng.randrange(k) if k > 1 else 0
        return GateOutcome(chosen, tuple("not_gated" for _ in range(k)), ranks, rejected)
    best = order[0]
    labels: list[GateLabel] = ["skip"] * k
    if not rejected:
        labels[best] = "execute"
        return GateOutcome(best, tuple(labels), ranks, rejected)
    if consecutive_skips >= settings.max_consecutive_skips:
        labels[best] = "forced"
        return GateOutcome(best, tuple(labels), ranks, rejected)
    return GateOutcome(None, tuple(labels), ranks, rejected)
