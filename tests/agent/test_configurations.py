"""The 7 shipped configurations of paper.yaml, run by the agent in both regimes, do what DESIGN §4's
table defines: which stages consult the world model, how many candidates, pointwise or pairwise, the
threshold, the blind context, and the gate (gated) or its counterfactual (ungated).

Reads the packaged paper.yaml; runs short trials against scripted servers on loopback and writes trial
dirs under tmp_path.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import buggy_script, coder_reply, good_script, make_spec, read_events, world_reply
from fakeserver import Reply, prompt_text

from mle_world.agent.__main__ import build_agent
from mle_world.agent.journal import load_checkpoint
from mle_world.agent.llm.client import Backoff
from mle_world.plan.config import load_paper_config, packaged_config
from mle_world.records import BudgetSettings, SearchSettings

pytestmark = pytest.mark.timeout(120)
FAST = Backoff(base_s=0.01, cap_s=0.05)

# DESIGN §4's table: candidates per step, selection, pointwise threshold, stages, context.
DEFINITION: dict[str, tuple[int, str, float | None, set[str], str] | None] = {
    "aide": None,
    "wm-point": (1, "pointwise", 0.5, {"improve"}, "full"),
    "wm-strict": (1, "pointwise", 0.7, {"improve"}, "full"),
    "wm-rank4": (4, "pointwise", 0.5, {"improve"}, "full"),
    "wm-pairwise4": (4, "pairwise", None, {"improve"}, "full"),
    "wm-all-stages": (1, "pointwise", 0.5, {"draft", "debug", "improve"}, "full"),
    "wm-blind": (1, "pointwise", 0.5, {"improve"}, "blind"),
}
P_IMPROVES = 0.6
"""What the scripted world model always predicts: above wm-point's threshold, below wm-strict's."""


def coder(request: dict[str, Any]) -> Reply:
    """A distinct good script per request (its seed), so candidates and drafts differ."""
    seed = int(request.get("seed") or 0)
    return coder_reply(good_script(round(0.3 + (seed % 997) / 2000, 4), tag=str(seed)), f"Plan {seed}.")


def world(request: dict[str, Any]) -> Reply:
    if '"better"' in prompt_text(request):
        return Reply(content=json.dumps({"better": "A", "confidence": 0.9, "rationale": "first"}))
    return world_reply(P_IMPROVES, p_bug=0.1, confidence=0.9)


def test_the_shipped_configurations_are_the_designed_ones():
    config = load_paper_config(packaged_config("paper.yaml"), lambda task: True)
    assert set(config.configurations) == set(DEFINITION)
    for name, definition in DEFINITION.items():
        wm = config.configurations[name]
        if definition is None:
            assert not wm.enabled
            continue
        k, selection, threshold, stages, context = definition
        assert wm.enabled and (wm.candidates, wm.selection, set(wm.applies_to), wm.context) == (
            k,
            selection,
            stages,
            context,
        )
        assert threshold is None or wm.threshold == threshold
        assert (wm.min_confidence, wm.max_consecutive_skips, wm.pairwise_confidence) == (0.6, 3, 0.7)


@pytest.mark.parametrize("regime", ["ungated", "gated"])
@pytest.mark.parametrize("name", list(DEFINITION))
def test_configuration_behaves_as_defined(tmp_path, competition, servers, name, regime):
    public, _ = competition
    servers["coder"].default = coder
    servers["world"].default = world
    wm = load_paper_config(packaged_config("paper.yaml"), lambda task: True).configurations[name]
    spec = make_spec(
        tmp_path,
        public,
        servers,
        regime=regime,
        configuration=name,
        world=wm,
        budget=BudgetSettings(
            time_limit_s=600, max_steps=3, exec_timeout_s=20, debug_timeout_s=10, min_step_s=0
        ),
        search=SearchSettings(num_drafts=2, debug_prob=1.0, max_debug_depth=3),
    )
    result = build_agent(spec, backoff=FAST, kill_grace_s=1.0).run()
    assert result.status == "completed" and result.executed == 3
    ckpt = load_checkpoint(Path(spec.paths.trial_dir) / "journal.json")
    assert ckpt is not None
    nodes = ckpt.nodes
    events = [e for e in read_events(Path(spec.paths.trial_dir)) if e["type"] == "prediction"]
    world_prompts = [prompt_text(r) for r in servers["world"].chat_requests]
    definition = DEFINITION[name]
    if definition is None:  # the control never asks the world model
        assert (
            not world_prompts and not events and all(n.prediction is None and n.gate is None for n in nodes)
        )
        assert [n.stage for n in nodes] == ["draft", "draft", "improve"]
        return
    k, selection, threshold, stages, context = definition

    # Consulted stages get k candidates with a prediction each and one event each; others one node.
    per_step = Counter(n.group for n in nodes)
    for node in nodes:
        consulted = node.stage in stages
        assert per_step[node.group] == (k if consulted else 1)
        assert (node.prediction is not None) == consulted
        if consulted:
            assert node.prediction is not None and node.prediction.mode == selection
    assert sorted(e["node_id"] for e in events) == sorted(n.id for n in nodes if n.prediction is not None)
    for event in events:
        assert event["executed"] == (event["actual_improved"] is not None)

    # Every step runs one node, or none when the gate vetoes it (gated only).
    for group in per_step:
        ran = [n for n in nodes if n.group == group and n.executed]
        assert len(ran) == (0 if any(n.gate == "skip" for n in nodes if n.group == group) else 1)

    decided = [n for n in nodes if n.prediction is not None]
    if regime == "ungated":  # everything runs; the gate's decision is only recorded
        assert result.vetoed_steps == 0
        assert {n.gate for n in decided} <= {"not_gated", "not_selected"}
        assert all(n.prediction is not None and n.prediction.counterfactual_gate for n in decided)
    else:
        assert all(n.prediction is not None and n.prediction.counterfactual_gate is None for n in decided)
        assert {n.gate for n in decided} <= {"execute", "skip", "forced", "not_selected"}
    if selection == "pointwise" and threshold is not None:
        # p_improves 0.6 at confidence 0.9 passes 0.5 and fails 0.7 (wm-strict).
        rejected = threshold > P_IMPROVES
        first = decided[0]
        assert first.prediction is not None and first.prediction.rejected is rejected
        label = first.prediction.counterfactual_gate if regime == "ungated" else first.gate
        assert label == ("skip" if rejected else "execute")

    # The blind world model sees the task and the candidate; never the data preview, parent or best score.
    hidden = ("Data Overview", "Parent solution", "best validation metric so far")
    assert world_prompts and all("Tiny task" in text for text in world_prompts)
    if context == "blind":
        assert not any(part in text for text in world_prompts for part in hidden)
        assert all("its score (and code) are hidden" in text for text in world_prompts)
    else:
        assert all(any(part in text for text in world_prompts) for part in hidden)


def test_regimes_and_the_control_pair_up_until_the_gate_acts(tmp_path, competition, servers):
    """Paired deltas compare trials by (task, seed): with a world model that accepts every candidate,
    `aide`, ungated `wm-point` and gated `wm-point` of one seed make the same choices and get the same
    code (the gate and the consultation draw nothing from the search's RNG or the request seeds)."""
    public, _ = competition

    def sometimes_buggy(request: dict[str, Any]) -> Reply:  # buggy nodes make the search draw
        return coder_reply(buggy_script()) if int(request.get("seed") or 0) % 3 == 0 else coder(request)

    servers["coder"].default = sometimes_buggy
    servers["world"].default = lambda request: world_reply(0.9, p_bug=0.1, confidence=0.9)
    wm = load_paper_config(packaged_config("paper.yaml"), lambda task: True).configurations["wm-point"]
    runs = []
    for name, regime in (("aide", "ungated"), ("wm-point", "ungated"), ("wm-point", "gated")):
        trial = tmp_path / f"{name}-{regime}"
        trial.mkdir()
        spec = make_spec(
            trial,
            public,
            servers,
            regime=regime,
            configuration=name,
            world=wm if name != "aide" else None,
            budget=BudgetSettings(
                time_limit_s=600, max_steps=8, exec_timeout_s=20, debug_timeout_s=10, min_step_s=0
            ),
            search=SearchSettings(num_drafts=2, debug_prob=0.5, max_debug_depth=3),
        )
        build_agent(spec, backoff=FAST, kill_grace_s=1.0).run()
        ckpt = load_checkpoint(Path(spec.paths.trial_dir) / "journal.json")
        assert ckpt is not None
        index = {n.id: i for i, n in enumerate(ckpt.nodes)}
        runs.append([(n.stage, index.get(n.parent_id or ""), n.code, n.metric) for n in ckpt.nodes])
    stages = {stage for stage, *_ in runs[0]}
    assert len(runs[0]) == 8 and stages == {"draft", "debug", "improve"}
    assert runs[0] == runs[1] == runs[2]
