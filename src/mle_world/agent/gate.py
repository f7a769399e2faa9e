"""The gate of DESIGN §4: which of a step's candidates runs, given the world model's verdicts.

Pure functions over predictions/comparisons and the settings; draws only from the RNG passed in.

Semantics:
- pointwise: a candidate is *rejected* when its prediction is valid, confidence >= min_confidence
  and (p_improves < threshold or p_bug >= bug_threshold). Invalid predictions never reject (fail
  open). With k candidates they are ranked in three tiers: accepted ones by p_improves (ties:
  predicted_metric in the task's direction, then generation order), then candidates whose
  prediction is invalid, then rejected ones; only the first is considered. So an invalid
  prediction is executed rather than vetoed along with a confidently rejected one.
- pairwise: a single-elimination tournament in generation order (odd one out gets a bye). Each
  match shows the two candidates in a seeded random order (position bias must not flow into the
  gate) and counts only when valid with confidence >= pairwise_confidence; an inconclusive match
  advances a seeded random one of the two. The winner is then compared with the best node so far
  (positions again seeded) when one exists, and is rejected when the best confidently wins.
- gated regime: a rejected best candidate is skipped ("skip": the step is vetoed) and the others
  are "not_selected"; after max_consecutive_skips vetoed steps in a row it is executed anyway
  ("forced"). When it is accepted it runs ("execute") and the others are "not_selected".
- ungated regime: same calls; one candidate runs ("not_gated"), chosen by the seeded RNG when there
  are several, the others are "not_selected". The gated decision is still computed and recorded as
  the counterfactual.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mle_world.records import GateLabel, Prediction, Regime, WorldModelSettings

if TYPE_CHECKING:  # only annotations: the audit replays the gate without the endpoint client's imports
    from mle_world.agent.world import Comparison


@dataclass(frozen=True)
class GateOutcome:
    chosen: int | None
    """Index of the candidate to execute; None when the whole step is skipped."""
    labels: tuple[GateLabel | None, ...]
    """Per candidate; None for a node no gate decided on (a step whose prompt overflowed)."""
    ranks: tuple[int, ...]
    rejected: bool
    """Whether the best-ranked candidate was rejected by the world model (the step would be vetoed)."""
    counterfactual: tuple[GateLabel, ...] | None = None
    """Ungated only: the labels the gated regime would have given (ignoring the forced rule)."""


@dataclass(frozen=True)
class Match:
    a: int
    b: int
    """Candidate indices as shown: `a` in position A, `b` in position B."""
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


def rank_pointwise(
    predictions: Sequence[Prediction], settings: WorldModelSettings, lower_is_better: bool | None
) -> list[int]:
    """Candidate indices best first: accepted by p_improves, then invalid (fail open), then rejected."""
    sign = 1.0 if lower_is_better else -1.0

    def key(i: int) -> tuple[int, float, float, int]:
        p = predictions[i]
        if rejects(p, settings):
            return (2, -(p.p_improves or 0.0), 0.0, i)
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
    rng: random.Random,
) -> Tournament:
    """Single elimination; `compare_round` gets all pairs of a round at once (to run them concurrently),
    each pair already in the (seeded random) order it is shown in."""
    active = list(range(n))
    eliminated_at: dict[int, int] = {}
    matches: list[Match] = []
    round_no = 0
    while len(active) > 1:
        pairs = []
        for i in range(0, len(active) - 1, 2):
            first, second = active[i], active[i + 1]
            pairs.append((second, first) if rng.random() < 0.5 else (first, second))
        results = compare_round(pairs)
        advancing = []
        for (a, b), comparison in zip(pairs, results, strict=True):
            counted = counts(comparison, min_confidence)
            if counted:
                winner = b if comparison.better == "B" else a
            else:
                winner = b if rng.random() < 0.5 else a
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


def pairwise_rejects(vs_best: Comparison | None, best_position: str, settings: WorldModelSettings) -> bool:
    """The best node so far (shown in `best_position`, "A" or "B") confidently beats the candidate."""
    return (
        vs_best is not None
        and counts(vs_best, settings.pairwise_confidence)
        and vs_best.better == best_position
    )


def pairwise_p_improves(vs_best: Comparison, best_position: str) -> float | None:
    """What p_improves means pairwise: the candidate's chance to beat the best so far, read off its
    comparison with the best (shown in `best_position`): the confidence when the candidate won, its
    complement when the best won; None without a valid confidence. Counted or not, it is recorded
    for calibration."""
    if not vs_best.valid or vs_best.confidence is None:
        return None
    return 1.0 - vs_best.confidence if vs_best.better == best_position else vs_best.confidence


def _gated(order: Sequence[int], rejected: bool, forced: bool) -> tuple[int | None, tuple[GateLabel, ...]]:
    labels: list[GateLabel] = ["not_selected"] * len(order)
    best = order[0]
    if not rejected:
        labels[best] = "execute"
        return best, tuple(labels)
    if forced:
        labels[best] = "forced"
        return best, tuple(labels)
    labels[best] = "skip"
    return None, tuple(labels)


def choose(
    *,
    order: Sequence[int],
    rejected: bool,
    regime: Regime,
    consecutive_skips: int,
    settings: WorldModelSettings,
    rng: random.Random,
    chosen: int | None = None,
) -> GateOutcome:
    """`chosen` (ungated only) is a candidate already drawn with `ungated_choice`."""
    k = len(order)
    ranks = tuple(order.index(i) for i in range(k))
    if regime == "ungated":
        pick = chosen if chosen is not None else ungated_choice(k, rng)
        labels: list[GateLabel] = ["not_selected"] * k
        labels[pick] = "not_gated"
        _, counterfactual = _gated(order, rejected, forced=False)
        return GateOutcome(pick, tuple(labels), ranks, rejected, counterfactual)
    forced = consecutive_skips >= settings.max_consecutive_skips
    pick_gated, gated_labels = _gated(order, rejected, forced)
    return GateOutcome(pick_gated, gated_labels, ranks, rejected)


def ungated_choice(k: int, rng: random.Random) -> int:
    """The candidate an ungated step executes: seeded random among several."""
    return rng.randrange(k) if k > 1 else 0
