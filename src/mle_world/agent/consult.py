"""World-model consultation: one step's candidates shown to the world model, ranked, and gated.

Reads the journal, the budget and the step's candidates; writes each candidate's `records.Prediction`
onto its node and builds the PredictionEvents the loop emits (it writes no file itself).
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from datetime import UTC, datetime

from mle_world.agent import gate
from mle_world.agent.budget import Budget
from mle_world.agent.journal import Journal, Node
from mle_world.agent.llm.client import ChatModel
from mle_world.agent.llm.fanout import fan_out
from mle_world.agent.llm.window import prompt_chars
from mle_world.agent.prompts import WorldContext
from mle_world.agent.seeds import request_seed, step_rng
from mle_world.agent.world import Comparison, WorldModel
from mle_world.records import PairwiseMatch, Prediction, PredictionEvent, Regime, WorldModelSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TaskFacts:
    """What every world prompt of a trial shows besides the step: the task and its environment."""

    task: str
    data_preview: str | None
    gpu: str | None
    """CUDA_VISIBLE_DEVICES of the scripts (the prompt says whether a GPU is there)."""


def pairwise_match(
    a: Node, b: Node, comparison: Comparison, counted: bool, *, versus_best: bool = False
) -> PairwiseMatch:
    """The journal's record of one comparison of `a` (shown as A) with `b`."""
    return PairwiseMatch(
        a=a.id,
        b=b.id,
        better=comparison.better,
        confidence=comparison.confidence,
        valid=comparison.valid,
        counted=counted,
        versus_best=versus_best,
    )


class Consultant:
    """Asks the `world` endpoint about a step's candidates and lets the gate choose (DESIGN §4).

    Every random choice comes from RNGs seeded by (trial seed, step), never from the loop's RNG, so
    that consulting does not change which parent the search picks next.
    """

    def __init__(
        self, model: ChatModel, settings: WorldModelSettings, facts: TaskFacts, *, seed: int, regime: Regime
    ) -> None:
        self.model = model
        self.world = WorldModel(model, settings.temperature)
        self.settings = settings
        self.facts = facts
        self.seed = seed
        self.regime = regime

    def context(self, parent: Node | None, journal: Journal, budget: Budget) -> WorldContext:
        """The world prompt's context: the task, the parent (reference) and the best metric so far."""
        best = journal.best_node()
        limit = prompt_chars(self.model)
        code_chars = None
        if limit is not None:
            # Up to three files (parent + two candidates) share what the task text leaves.
            preview = self.facts.data_preview or ""
            code_chars = max(0, (limit - len(self.facts.task) - len(preview) - 6000) // 3)
        return WorldContext(
            task=self.facts.task,
            blind=self.settings.context == "blind",
            data_preview=self.facts.data_preview,
            reference=parent,
            best_metric=best.metric if best else None,
            lower_is_better=journal.lower_is_better,
            has_best=best is not None,
            debug_timeout_s=budget.exec_timeout(debug=True),
            exec_timeout_s=budget.exec_timeout(debug=False),
            gpu=self.facts.gpu,
            code_chars=code_chars,
        )

    def consult(
        self,
        parent: Node | None,
        nodes: list[Node],
        group: int,
        journal: Journal,
        budget: Budget,
        consecutive_skips: int,
    ) -> gate.GateOutcome:
        """Predict (pointwise) or compare (pairwise), record each candidate's prediction, and choose."""
        wm = self.settings
        ctx = self.context(parent, journal, budget)
        # The client adds its outage window: a request never outlives the trial by more than that.
        timeout = budget.left()
        seed = self.seed
        # Drawn before any call so that it does not depend on the world model's answers.
        ungated = gate.ungated_choice(len(nodes), step_rng(seed, group, "ungated"))
        if wm.selection == "pointwise":
            predictions: list[Prediction] = fan_out(
                lambda n: self.world.predict(
                    ctx, n, timeout, request_seed(seed, group, n.candidate, 0, "predict")
                ),
                nodes,
            )
            order = gate.rank_pointwise(predictions, wm, journal.lower_is_better)
            for rank, i in enumerate(order):
                verdict = {"rank": rank, "rejected": gate.rejects(predictions[i], wm)}
                nodes[i].prediction = predictions[i].model_copy(update=verdict)
            rejected = gate.rejects(predictions[order[0]], wm)
        else:
            order, rejected = self._pairwise(ctx, nodes, journal, timeout, group, ungated)
        outcome = gate.choose(
            order=order,
            rejected=rejected,
            regime=self.regime,
            consecutive_skips=consecutive_skips,
            settings=wm,
            rng=random.Random(0),
            chosen=ungated,
        )
        if outcome.counterfactual is not None:
            for node, label in zip(nodes, outcome.counterfactual, strict=True):
                if node.prediction is not None:
                    node.prediction = node.prediction.model_copy(update={"counterfactual_gate": label})
        log.info("gate: labels=%s chosen=%s rejected=%s", outcome.labels, outcome.chosen, rejected)
        return outcome

    def _versus_best(
        self, ctx: WorldContext, best: Node, candidate: Node, timeout: float, group: int
    ) -> tuple[Comparison, str]:
        """Compare a candidate with the best node, the best shown in a seeded random position."""
        seed = self.seed
        best_first = step_rng(seed, group, f"versus-best:{candidate.candidate}").random() < 0.5
        a, b = (best, candidate) if best_first else (candidate, best)
        comparison = self.world.compare(
            ctx, a, b, timeout, request_seed(seed, group, candidate.candidate, 0, "versus-best")
        )
        return comparison, "A" if best_first else "B"

    def _pairwise(
        self, ctx: WorldContext, nodes: list[Node], journal: Journal, timeout: float, group: int, ungated: int
    ) -> tuple[list[int], bool]:
        """The tournament, the winner (and, ungated, the executed candidate) against the best."""
        world = self.world
        wm = self.settings
        seed = self.seed
        round_no = iter(range(1_000))

        def compare_round(pairs: list[tuple[int, int]]) -> list[Comparison]:
            r = next(round_no)
            return fan_out(
                lambda p: world.compare(
                    ctx,
                    nodes[p[0]],
                    nodes[p[1]],
                    timeout,
                    request_seed(seed, group, p[0] * 64 + p[1], r, "compare"),
                ),
                pairs,
            )

        result = gate.tournament(
            len(nodes), compare_round, wm.pairwise_confidence, step_rng(seed, group, "pairwise")
        )
        comparisons: dict[int, list[PairwiseMatch]] = {i: [] for i in range(len(nodes))}
        for match in result.matches:
            entry = pairwise_match(nodes[match.a], nodes[match.b], match.comparison, match.counted)
            comparisons[match.a].append(entry)
            comparisons[match.b].append(entry)
        best = journal.best_node()
        # The gate needs the winner against the best; an ungated run also compares the candidate it
        # executes, so that the calibration covers every executed step.
        versus: dict[int, tuple[Comparison, str]] = {}
        if best is not None:
            wanted = [result.winner]
            if self.regime == "ungated" and ungated != result.winner:
                wanted.append(ungated)
            answers = fan_out(lambda i: self._versus_best(ctx, best, nodes[i], timeout, group), wanted)
            versus = dict(zip(wanted, answers, strict=True))
        for i, (comparison, best_position) in versus.items():
            assert best is not None
            a, b = (best, nodes[i]) if best_position == "A" else (nodes[i], best)
            counted = gate.counts(comparison, wm.pairwise_confidence)
            comparisons[i].append(pairwise_match(a, b, comparison, counted, versus_best=True))
        order = sorted(range(len(nodes)), key=lambda i: (result.ranks[i], i))
        for i, node in enumerate(nodes):
            mine = comparisons[i]
            p_improves = None
            confidence = mine[-1].confidence if mine else None
            rejected = None
            if i in versus:
                comparison, best_position = versus[i]
                rejected = gate.pairwise_rejects(comparison, best_position, wm)
                p_improves = gate.pairwise_p_improves(comparison, best_position)
                if p_improves is not None:
                    confidence = comparison.confidence
            node.prediction = Prediction(
                mode="pairwise",
                valid=all(c.valid for c in mine),
                p_improves=p_improves,
                confidence=confidence,
                rank=result.ranks[i],
                rejected=rejected,
                comparisons=tuple(mine),
            )
        winner_rejected = result.winner in versus and gate.pairwise_rejects(*versus[result.winner], wm)
        return order, winner_rejected

    def prediction_event(self, node: Node, prev_best: Node | None, journal: Journal) -> PredictionEvent:
        """The node's prediction and, when it ran, whether it improved on `prev_best` (the best before it)."""
        prediction = node.prediction or Prediction(mode=self.settings.selection, valid=False)
        # A chosen candidate the budget left no time to run (loop.execute sets no exec_time then) has
        # no outcome: scoring the prediction against "buggy" would score the budget, not the script.
        ran = node.executed and node.exec_time is not None
        improved = not node.is_buggy and journal.improves(
            node.metric, prev_best.metric if prev_best else None
        )
        return PredictionEvent(
            ts=datetime.now(UTC),
            node_id=node.id,
            stage=node.stage,
            step=node.group,
            candidate=node.candidate,
            prediction=prediction,
            gate=node.gate or "execute",
            executed=ran,
            actual_buggy=node.is_buggy if ran else None,
            actual_improved=improved if ran else None,
            actual_metric=node.metric if ran else None,
            budget_time_s=node.budget_time_s,
        )
