"""The audit's what-if gates decide as the agent's gate does: two ungated runs of the real agent that differ
only in their gate settings make the same steps and world-model calls, and the what-if computed from the
first run's records at the second run's settings counts the steps the second run's own recorded
counterfactual gate vetoed.

Reads nothing; runs two short ungated trials against scripted servers on loopback, then audits them in an
output dir under tmp_path.
"""

from __future__ import annotations

import random
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import coder_reply, good_script, make_spec, read_events, world_reply
from auditkit import tid, write_launch
from fakeserver import FakeOpenAIServer, Reply

from mle_world.agent.__main__ import build_agent
from mle_world.agent.llm.client import Backoff
from mle_world.audit import audit
from mle_world.audit.whatif import Setting
from mle_world.records import BudgetSettings, SearchSettings, WorldModelSettings

pytestmark = pytest.mark.timeout(180)
FAST = Backoff(base_s=0.01, cap_s=0.05)
BASE = WorldModelSettings(enabled=True, candidates=2, applies_to=("draft", "improve"))
"""threshold 0.5, min_confidence 0.6, bug_threshold 0.5, max_consecutive_skips 3 (the defaults)."""
OTHER = Setting(threshold=0.7, min_confidence=0.0, bug_threshold=0.8)
"""A point of the what-if grid other than BASE's settings."""


def coder(request: dict[str, Any]) -> Reply:
    seed = int(request.get("seed") or 0)
    return coder_reply(good_script(round(0.3 + (seed % 997) / 2000, 4), tag=str(seed)), f"Plan {seed}.")


def world(request: dict[str, Any]) -> Reply:
    """A verdict drawn from the request's seed: the same question gets the same answer in both runs."""
    rng = random.Random(int(request.get("seed") or 0))
    p_improves, p_bug, confidence = rng.random() * 0.9, rng.random() * 0.9, 0.5 + rng.random() * 0.5
    return world_reply(round(p_improves, 3), p_bug=round(p_bug, 3), confidence=round(confidence, 3))


def run(root: Path, competition: Path, servers: dict[str, FakeOpenAIServer], wm: WorldModelSettings) -> Path:
    """An ungated trial of configuration `wm-x` in `root`'s output dir `out`; returns that dir."""
    root.mkdir()
    spec = make_spec(
        root,
        competition,
        servers,
        regime="ungated",
        configuration="wm-x",
        world=wm,
        budget=BudgetSettings(
            time_limit_s=600, max_steps=6, exec_timeout_s=20, debug_timeout_s=10, min_step_s=0
        ),
        search=SearchSettings(num_drafts=2, debug_prob=1.0, max_debug_depth=3),
    )
    assert build_agent(spec, backoff=FAST, kill_grace_s=1.0).run().status == "completed"
    out = root / "out"
    shutil.copytree(spec.paths.trial_dir, out / "runs" / "wm-x" / "tiny_seed34")
    write_launch(out, "ungated", [tid("ungated", "wm-x", "tiny", 34)])
    return out


def recorded_skips(out: Path) -> dict[str, tuple[int, int]]:
    """Per stage, (steps with an outcome, those the run's own counterfactual gate vetoed)."""
    steps: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for event in read_events(out / "runs" / "wm-x" / "tiny_seed34"):
        if event["type"] == "prediction":
            steps[event["step"]].append(event)
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for events in steps.values():
        ran = [e for e in events if e["gate"] == "not_gated" and e["actual_improved"] is not None]
        if ran:
            counts[ran[0]["stage"]][0] += 1
            counts[ran[0]["stage"]][1] += any(
                e["prediction"]["counterfactual_gate"] == "skip" for e in events
            )
    return {stage: (n, skips) for stage, (n, skips) in counts.items()}


def test_the_whatif_at_other_settings_counts_what_the_agent_would_have_vetoed(tmp_path, competition, servers):
    public, _ = competition
    servers["coder"].default = coder
    servers["world"].default = world
    first = run(tmp_path / "a", public, servers, BASE)
    other = BASE.model_copy(update=vars(OTHER))
    second = run(tmp_path / "b", public, servers, other)
    said = [
        [
            e["prediction"].get("p_improves")
            for e in read_events(out / "runs" / "wm-x" / "tiny_seed34")
            if e["type"] == "prediction"
        ]
        for out in (first, second)
    ]
    assert said[0] == said[1] and len(said[0]) >= 10  # the same steps and verdicts

    rows = audit([first]).whatif.rows
    for setting, out in ((Setting(0.5, 0.6, 0.5), first), (OTHER, second)):
        whatif = {r.stage: (r.decisions, r.would_skip) for r in rows if r.setting == setting}
        assert whatif == recorded_skips(out)
    # Neither setting is trivial here: each vetoes some steps and runs others.
    for setting in (Setting(0.5, 0.6, 0.5), OTHER):
        chosen = [r for r in rows if r.setting == setting]
        assert 0 < sum(r.would_skip for r in chosen) < sum(r.decisions for r in chosen)
