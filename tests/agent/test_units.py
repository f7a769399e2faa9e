"""Unit tests of the pure parts: search policy, gate, world/review parsing, code extraction, budget.

Reads and writes nothing but tmp files.
"""

from __future__ import annotations

import random

import pytest

from mle_world.agent import gate
from mle_world.agent.budget import Budget, stage_for
from mle_world.agent.journal import MEMORY_SEPARATOR, Journal, Node, valid_metric
from mle_world.agent.policy import select_parent, stage_of
from mle_world.agent.prompts import extract_plan_and_code, render_sections
from mle_world.agent.review import buggy_verdict
from mle_world.agent.world import Comparison, parse_json_object, validate_prediction
from mle_world.records import (
    BudgetSettings,
    Prediction,
    SearchSettings,
    StageGuidance,
    WorldModelSettings,
    improves,
)


def said(valid: bool, **fields: object) -> Prediction:
    """A pointwise prediction as the world model's parser returns it."""
    return Prediction(mode="pointwise", valid=valid, **fields)


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def now(self) -> float:
        return self.t


def node(
    i: int, *, parent: str | None = None, buggy: bool = False, metric: float | None = None, **kw
) -> Node:
    return Node(
        id=f"n{i}",
        step=i,
        stage="draft" if parent is None else "improve",
        parent_id=parent,
        is_buggy=buggy,
        metric=metric,
        executed=kw.pop("executed", True),
        **kw,
    )


def test_policy_drafts_then_debugs_then_improves_best():
    rng = random.Random(0)
    search = SearchSettings(num_drafts=2, debug_prob=1.0, max_debug_depth=1)
    j = Journal(lower_is_better=False)
    assert select_parent(j, search, rng) is None
    j.append(node(0, buggy=True))
    j.append(node(1, metric=0.3))
    assert select_parent(j, search, rng).id == "n0"  # buggy leaf
    j.append(node(2, parent="n0", metric=0.6, debug_depth=1))
    assert select_parent(j, search, rng).id == "n2"  # n0 no longer a leaf; greedy best
    # A skipped child does not make its parent a non-leaf, and skipped nodes are not drafts.
    j2 = Journal(lower_is_better=True)
    j2.append(node(0, buggy=True))
    j2.append(node(1, parent="n0", executed=False, skipped=True))
    assert select_parent(j2, SearchSettings(num_drafts=1, debug_prob=1.0), rng).id == "n0"
    assert stage_of(None) == "draft" and stage_of(j2.nodes[0]) == "debug"


def test_policy_respects_max_debug_depth_inclusive():
    search = SearchSettings(num_drafts=1, debug_prob=1.0, max_debug_depth=1)
    j = Journal()
    j.append(node(0, buggy=True))
    j.append(node(1, parent="n0", buggy=True, debug_depth=1))
    assert select_parent(j, search, random.Random(0)).id == "n1"  # depth 1 <= 1
    j.append(node(2, parent="n1", buggy=True, debug_depth=2))
    assert select_parent(j, search, random.Random(0)) is None  # no good node -> draft


def test_best_node_direction_and_memory():
    j = Journal(lower_is_better=True)
    j.append(node(0, metric=0.5, plan="p0", analysis="a0"))
    j.append(node(1, metric=0.2))
    j.append(node(2, buggy=True))
    j.append(node(3, executed=False, skipped=True, metric=None))
    assert j.best_node().id == "n1" and j.best_node(before_step=1).id == "n0"
    assert "Design: p0" in j.memory() and j.memory().count("Design") == 2
    assert [n.id for n in j.top_nodes(1)] == ["n1"]


def test_memory_shrunk_to_fit_keeps_the_best_nodes_then_the_latest_and_says_what_it_left_out():
    """A long journal in a short context: the three best nodes stay (n0, the best, is the oldest), the
    remaining room goes to the most recent ones, in journal order, after a line counting the rest."""
    j = Journal(lower_is_better=False)
    for i, metric in enumerate([0.9, 0.1, 0.2, 0.3, 0.4, 0.5]):
        j.append(node(i, metric=metric, plan=f"p{i} " + "x" * 100, analysis=f"a{i}"))
    entry = len(f"Design: p0 {'x' * 100}\nResults: a0\nValidation Metric: 0.9") + len(MEMORY_SEPARATOR)
    memory = j.memory(max_chars=3 * entry + 120)  # three entries and the line: not a fourth entry
    kept = [
        int(line[len("Design: p") :].split()[0]) for line in memory.splitlines() if line.startswith("Design:")
    ]
    assert kept == [0, 4, 5] and memory.startswith("(3 earlier solution(s) omitted"), memory
    assert len(memory) <= 3 * entry + 120


def test_valid_metric_accepts_ints_rejects_bools_and_nan():
    assert valid_metric(1) == 1.0 and valid_metric(0.5) == 0.5
    assert valid_metric(True) is None and valid_metric(float("nan")) is None and valid_metric("0.3") is None


WM = WorldModelSettings(
    enabled=True, threshold=0.5, bug_threshold=0.5, min_confidence=0.6, max_consecutive_skips=2
)


@pytest.mark.parametrize(
    ("prediction", "rejected"),
    [
        (said(True, p_bug=0.1, p_improves=0.4, confidence=0.9), True),
        (said(True, p_bug=0.6, p_improves=0.9, confidence=0.9), True),
        (said(True, p_bug=0.1, p_improves=0.5, confidence=0.9), False),
        (said(True, p_bug=0.9, p_improves=0.0, confidence=0.59), False),
        (said(False, error="bad"), False),
        # the boundaries as the paper's rule states them: confidence >= min_confidence, p_bug >= bug_threshold
        (said(True, p_bug=0.1, p_improves=0.4, confidence=0.6), True),
        (said(True, p_bug=0.5, p_improves=0.9, confidence=0.9), True),
        (said(True, p_bug=None, p_improves=0.9, confidence=0.9), False),  # no p_bug: no bug veto
    ],
)
def test_pointwise_rejection(prediction, rejected):
    assert gate.rejects(prediction, WM) is rejected


def test_improves_respects_the_direction_and_missing_metrics():
    assert improves(0.8, 0.7, False) and not improves(0.7, 0.8, False) and not improves(0.8, 0.8, False)
    assert improves(0.7, 0.8, True) and not improves(0.8, 0.7, True) and not improves(0.8, 0.8, True)
    assert improves(0.8, 0.7, None)  # unknown direction: higher is better (AIDE)
    # Any metric improves on no reference (the first good node); no metric improves on nothing.
    assert improves(5.0, None, True) and not improves(None, 0.5, False) and not improves(None, None, False)
    journal = Journal([], lower_is_better=True)
    assert journal.improves(0.1, 0.2) and not journal.improves(0.3, 0.2)


def test_pairwise_p_improves_reads_the_comparison_with_the_best():
    # The candidate's chance to beat the best: the confidence when it won, else the complement.
    assert gate.pairwise_p_improves(Comparison(True, "B", 0.8), best_position="A") == 0.8
    assert gate.pairwise_p_improves(Comparison(True, "A", 0.8), best_position="A") == pytest.approx(0.2)
    assert gate.pairwise_p_improves(Comparison(True, "A", 0.8), best_position="B") == 0.8
    assert gate.pairwise_p_improves(Comparison(True, "A", None), best_position="A") is None
    assert gate.pairwise_p_improves(Comparison(False, error="x"), best_position="B") is None


def test_rank_pointwise_ties_and_invalid():
    preds = [
        said(False),
        said(True, p_improves=0.7, predicted_metric=0.8, confidence=1, p_bug=0),
        said(True, p_improves=0.7, predicted_metric=0.9, confidence=1, p_bug=0),
        said(True, p_improves=0.2, confidence=1, p_bug=0),
    ]
    # Accepted by p_improves (ties by predicted metric), then the invalid one (fail open), then the
    # confidently rejected one: an invalid prediction is never vetoed because a valid one was rejected.
    assert gate.rank_pointwise(preds, WM, lower_is_better=False) == [2, 1, 0, 3]
    assert gate.rank_pointwise(preds, WM, lower_is_better=True) == [1, 2, 0, 3]
    assert gate.rank_pointwise([preds[3], preds[0]], WM, lower_is_better=False) == [1, 0]
    # Rejected ones last, the likeliest to improve first: a forced step runs that one.
    rejected = [said(True, p_improves=p, confidence=1, p_bug=0) for p in (0.1, 0.3, 0.2)]
    assert gate.rank_pointwise(rejected, WM, lower_is_better=False) == [1, 2, 0]


def test_choose_gated_skips_then_forces_and_ungated_is_seeded():
    rng = random.Random(1)
    out = gate.choose(order=[1, 0], rejected=True, regime="gated", consecutive_skips=1, settings=WM, rng=rng)
    assert out.chosen is None and out.labels == ("not_selected", "skip")
    out = gate.choose(order=[1, 0], rejected=True, regime="gated", consecutive_skips=2, settings=WM, rng=rng)
    assert out.chosen == 1 and out.labels == ("not_selected", "forced")
    out = gate.choose(order=[1, 0], rejected=False, regime="gated", consecutive_skips=0, settings=WM, rng=rng)
    assert out.chosen == 1 and out.labels == ("not_selected", "execute") and out.counterfactual is None
    out = gate.choose(
        order=[1, 0], rejected=True, regime="ungated", consecutive_skips=0, settings=WM, rng=rng, chosen=0
    )
    assert out.labels == ("not_gated", "not_selected") and out.counterfactual == ("not_selected", "skip")
    picks = [
        gate.choose(
            order=[0, 1, 2, 3],
            rejected=True,
            regime="ungated",
            consecutive_skips=0,
            settings=WM,
            rng=random.Random(7),
        ).chosen
        for _ in range(3)
    ]
    assert len(set(picks)) == 1 and picks[0] is not None


class Unswapped(random.Random):
    """An RNG whose draws never swap positions and advance the first of an inconclusive match."""

    def random(self) -> float:
        return 0.9


def test_tournament_counts_only_confident_results():
    results = {
        (0, 1): Comparison(True, "B", 0.9),
        (2, 3): Comparison(True, "B", 0.5),  # inconclusive: a seeded random one advances (here the first)
        (1, 2): Comparison(False, error="x"),
        (1, 4): Comparison(True, "B", 0.8),
    }
    calls = []

    def compare_round(pairs):
        calls.append(pairs)
        return [results[p] for p in pairs]

    t = gate.tournament(5, compare_round, 0.7, Unswapped())
    # round 1: (0,1)->1, (2,3)->2, 4 bye; round 2: (1,2)->1, 4 bye; round 3: (1,4)
    assert calls[0] == [(0, 1), (2, 3)]
    assert calls[1] == [(1, 2)] and calls[2] == [(1, 4)]
    assert t.winner == 4 and t.ranks[4] == 0 and t.ranks[1] == 1
    assert [m.counted for m in t.matches] == [True, False, False, True]


def test_a_comparison_exactly_at_the_pairwise_confidence_counts():
    t = gate.tournament(2, lambda pairs: [Comparison(True, "B", 0.7) for _ in pairs], 0.7, Unswapped())
    assert t.winner == 1 and [m.counted for m in t.matches] == [True]


def test_tournament_ranks_and_seeded_positions():
    t = gate.tournament(4, lambda pairs: [Comparison(True, "A", 0.9) for _ in pairs], 0.7, Unswapped())
    assert t.winner == 0 and t.ranks == (0, 2, 1, 2)
    # A model that always answers "A" no longer decides by generation order: positions are drawn.
    winners = {
        gate.tournament(
            4, lambda pairs: [Comparison(True, "A", 0.9) for _ in pairs], 0.7, random.Random(s)
        ).winner
        for s in range(20)
    }
    assert len(winners) > 1
    settings = WorldModelSettings(pairwise_confidence=0.7)
    assert gate.pairwise_rejects(Comparison(True, "A", 0.8), "A", settings)
    assert not gate.pairwise_rejects(Comparison(True, "A", 0.8), "B", settings)
    assert not gate.pairwise_rejects(Comparison(True, "A", 0.6), "A", settings)


def test_json_parsing_variants():
    assert parse_json_object('{"a": 1}') == {"a": 1}
    assert parse_json_object('thinking {not json} ... final: {"a": {"b": "}"}}') == {"a": {"b": "}"}}
    assert parse_json_object('```json\n{"a": 2}\n```') == {"a": 2}
    assert parse_json_object("no json") is None
    # Numeric strings are coerced; only a bad field is dropped.
    dropped = validate_prediction({"p_bug": "high", "p_improves": "0.5", "confidence": 1})
    assert (
        dropped.valid
        and dropped.p_bug is None
        and dropped.p_improves == 0.5
        and "p_bug" in (dropped.error or "")
    )
    no_confidence = validate_prediction({"p_bug": 0.1, "p_improves": 0.2})
    assert no_confidence.valid and no_confidence.confidence is None and not gate.rejects(no_confidence, WM)
    assert not validate_prediction({"p_bug": "high", "p_improves": None, "confidence": 1}).valid
    ok = validate_prediction({"p_bug": 0, "p_improves": 1, "confidence": 0.7, "predicted_metric": None})
    assert ok.valid and ok.p_improves == 1.0 and ok.predicted_metric is None


def test_extract_plan_and_code():
    plan, code = extract_plan_and_code(
        "<think>```python\nwrong()\n```</think>Plan here.\n```python\nprint(1)\n```"
    )
    assert plan == "Plan here." and code == "print(1)"
    plan, code = extract_plan_and_code("Plan.\n```\ndef main():\n    pass\n```")
    assert "__main__" in code
    assert extract_plan_and_code("import os\nprint(os)") == ("", "import os\nprint(os)")
    assert extract_plan_and_code("Just words.") == ("Just words.", "")


def test_render_nested_sections():
    text = render_sections({"A": "x", "B": {"C": ["one", "two"]}, "Empty": None})
    assert text == "# A\n\nx\n\n# B\n\n## C\n\n- one\n- two"


def test_review_rules():
    n = node(0)
    answer = {
        "is_bug": False,
        "has_csv_submission": True,
        "summary": "ok",
        "metric": 0.5,
        "lower_is_better": False,
    }
    assert not buggy_verdict(n, answer, True).is_buggy
    assert buggy_verdict(n, answer, False).is_buggy  # file missing on disk
    assert buggy_verdict(n, {**answer, "has_csv_submission": False}, True).is_buggy
    assert buggy_verdict(n, {**answer, "metric": None}, True).is_buggy
    assert buggy_verdict(node(1, exc_type="ValueError"), answer, True).is_buggy
    assert buggy_verdict(n, None, True).is_buggy


def test_budget_progress_stages_and_timeouts():
    clock = FakeClock()
    settings = BudgetSettings(
        time_limit_s=100, max_steps=10, exec_timeout_s=50, debug_timeout_s=5, min_step_s=10
    )
    budget = Budget(settings, clock, carried_s=20)
    stages = (
        StageGuidance(name="a", until=0.35, guidance=""),
        StageGuidance(name="b", until=1.0, guidance=""),
    )
    assert budget.used() == 20 and budget.progress(1) == pytest.approx(0.2)
    assert budget.view(4, stages).stage.name == "b"  # steps dominate: 0.4
    clock.t += 40
    assert budget.exec_timeout(debug=False) == 40 and budget.exec_timeout(debug=True) == 5
    clock.t += 35
    assert budget.stop_reason(3) == "time_limit" and budget.stop_reason(10) == "max_steps"
    assert stage_for(1.0, stages).name == "b" and stage_for(0.1, ()) is None
