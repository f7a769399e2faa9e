"""journal.json and events.jsonl written before the one `records.Prediction` shape still load.

Reads the fixtures in tests/agent/compat/ (written by the agent at commit c376408, when a node kept a
`journal.WorldInfo` with comparisons as plain dicts and a prediction event held the prediction's
fields at its top level: see compat/README.md); writes trial dirs and sweeps under tmp_path.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import candidate_index, coder_reply, good_script, make_spec, world_reply
from auditkit import prediction, tid, write_events, write_launch, write_report

from mle_world.agent.__main__ import build_agent
from mle_world.agent.journal import load_checkpoint
from mle_world.agent.llm.client import Backoff
from mle_world.audit import audit
from mle_world.audit.analysis import calibration_rows
from mle_world.audit.pages import render_trial_page
from mle_world.audit.trialview import load_trial_view
from mle_world.records import BudgetSettings, PairwiseMatch, PredictionEvent, WorldModelSettings
from mle_world.trial_events import read_events

pytestmark = pytest.mark.timeout(60)
COMPAT = Path(__file__).parent / "compat"
FLAT = (
    "mode",
    "valid",
    "p_bug",
    "p_improves",
    "predicted_metric",
    "confidence",
    "rejected",
    "counterfactual_gate",
)


def raw_nodes(case: str) -> list[dict[str, Any]]:
    nodes: list[dict[str, Any]] = json.loads((COMPAT / case / "journal.json").read_text())["nodes"]
    return nodes


def raw_events(case: str) -> list[dict[str, Any]]:
    lines = (COMPAT / case / "events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["type"] == "prediction"]


@pytest.mark.parametrize("case", ["ungated-pointwise", "gated-pairwise"])
def test_old_journal_loads_every_prediction_unchanged(case: str) -> None:
    ckpt = load_checkpoint(COMPAT / case / "journal.json")
    assert ckpt is not None
    raws = raw_nodes(case)
    # Every node but the draft was a candidate of an improve step the world model was asked about.
    assert (
        len(ckpt.nodes) == len(raws) > 1
        and sum(n.prediction is not None for n in ckpt.nodes) == len(raws) - 1
    )
    for node, raw in zip(ckpt.nodes, raws, strict=True):
        old = raw["prediction"]
        if old is None:
            assert node.prediction is None
            continue
        assert node.prediction is not None
        new = node.prediction.model_dump(mode="json")
        # Nothing lost or changed; a stored match only gains `versus_best: false` where it had none.
        for match in old["comparisons"]:
            match.setdefault("versus_best", False)
        assert new == old


def test_old_journal_values_read_as_typed_records() -> None:
    pointwise = load_checkpoint(COMPAT / "ungated-pointwise" / "journal.json")
    pairwise = load_checkpoint(COMPAT / "gated-pairwise" / "journal.json")
    assert pointwise is not None and pairwise is not None
    invalid = pointwise.nodes[3].prediction
    assert invalid is not None and not invalid.valid and invalid.error == "no JSON object in the reply"
    assert [n.prediction.counterfactual_gate for n in pointwise.nodes[1:] if n.prediction] == [
        "not_selected",
        "skip",
        "execute",  # the invalid prediction ranks above the rejected one (fail open)
        "not_selected",
    ]
    winner = pairwise.nodes[3].prediction
    assert winner is not None and winner.mode == "pairwise" and winner.p_improves == pytest.approx(0.9)
    assert all(isinstance(m, PairwiseMatch) for m in winner.comparisons)
    assert [m.versus_best for m in winner.comparisons] == [False, True]
    assert winner.comparisons[-1].b == pairwise.nodes[3].id and winner.comparisons[-1].counted


@pytest.mark.parametrize("case", ["ungated-pointwise", "gated-pairwise"])
def test_old_events_load_with_the_prediction_nested(case: str) -> None:
    events = read_events(COMPAT / case / "events.jsonl")
    raws = raw_events(case)
    assert events.bad_lines == 0 and len(events.predictions) == len(raws) > 0
    for event, raw in zip(events.predictions, raws, strict=True):
        assert {key: getattr(event.prediction, key) for key in FLAT} == {key: raw[key] for key in FLAT}
        assert (event.node_id, event.gate, event.executed, event.actual_improved, event.step) == (
            raw["node_id"],
            raw["gate"],
            raw["executed"],
            raw["actual_improved"],
            raw["step"],
        )
    # A line in the new shape reads back the same as the old line it came from.
    for event in events.predictions:
        assert PredictionEvent.model_validate_json(event.model_dump_json()) == event


def test_trial_page_of_old_files(tmp_path: Path) -> None:
    trial = tmp_path / "gated-pairwise"
    shutil.copytree(COMPAT / "gated-pairwise", trial)
    view = load_trial_view(trial)
    assert not [p for p in view.problems if "journal" in p or "events" in p]
    winner = view.nodes[3]
    assert winner.prediction is not None and winner.prediction.p_improves == pytest.approx(0.9)
    assert winner.observed.improved is True and winner.rejected is False and winner.is_best is False
    assert view.nodes[6].is_best  # 0.77 > 0.74 > 0.51: the last improvement is the best
    page = render_trial_page(view)
    assert f"{winner.node.id[:8]} (B), against the best: B better, confidence 0.9" in page


def test_resume_from_an_old_journal_and_events(tmp_path: Path, competition, servers) -> None:
    """A trial checkpointed by the old code resumes: old nodes intact, new events beside the old lines."""
    public, _ = competition
    servers["coder"].default = lambda r: coder_reply(good_script(0.9 + candidate_index(r) / 100))
    servers["world"].default = lambda r: world_reply(0.8, confidence=0.9)
    spec = make_spec(
        tmp_path,
        public,
        servers,
        regime="ungated",
        world=WorldModelSettings(enabled=True, candidates=2, threshold=0.65),
        budget=BudgetSettings(
            time_limit_s=120, max_steps=4, exec_timeout_s=20, debug_timeout_s=10, min_step_s=0
        ),
    )
    trial = Path(spec.paths.trial_dir)
    for name in ("journal.json", "events.jsonl"):
        shutil.copy(COMPAT / "ungated-pointwise" / name, trial / name)
    result = build_agent(spec, backoff=Backoff(base_s=0.01, cap_s=0.05), kill_grace_s=1.0).run()
    assert result.status == "completed" and result.resumed == 1 and result.executed == 4
    ckpt = load_checkpoint(trial / "journal.json")
    assert ckpt is not None and len(ckpt.nodes) == 7
    before = [n["prediction"] for n in raw_nodes("ungated-pointwise")]
    assert [n.prediction.p_improves if n.prediction else None for n in ckpt.nodes[:5]] == [
        p["p_improves"] if p else None for p in before
    ]
    new = [n.prediction for n in ckpt.nodes[5:]]
    assert all(p is not None and p.valid and p.p_improves == pytest.approx(0.8) for p in new)
    events = read_events(trial / "events.jsonl")
    assert events.bad_lines == 0 and len(events.predictions) == 6
    assert [e.prediction.p_improves for e in events.predictions[4:]] == [0.8, 0.8]
    lines = [json.loads(line) for line in (trial / "events.jsonl").read_text().splitlines()]
    assert ["prediction" in e for e in lines if e["type"] == "prediction"] == [False] * 4 + [True] * 2


def flat(event: dict[str, Any]) -> dict[str, Any]:
    """An auditkit prediction line (the shape the agent writes now) in the old shape: fields at the top."""
    rest = dict(event)
    return {**rest.pop("prediction"), **rest}


def test_world_table_is_the_same_from_old_and_new_event_lines(tmp_path: Path) -> None:
    lines = [
        prediction("not_gated", 0.9, True, counterfactual_gate="execute"),
        prediction("not_gated", 0.2, False, counterfactual_gate="skip"),
        prediction("not_gated", 0.6, False, counterfactual_gate="execute"),
        prediction("not_gated", 0.4, True, counterfactual_gate="skip", mode="pairwise"),
        prediction("not_gated", 0.99, False, valid=False),
        prediction("not_selected", 0.7, None, executed=False),
    ]
    tables = []
    assert all("prediction" in e for e in lines) and not any("prediction" in flat(e) for e in lines)
    for shape, events in (("old", [flat(e) for e in lines]), ("new", lines)):
        out = tmp_path / shape
        write_launch(out, "ungated", [tid("ungated", "wm-point", "A", 34)])
        write_report(out, "ungated", "wm-point", "A", 34, score=0.5)
        write_events(out, "wm-point", "A", 34, events)
        result = audit([out])
        tables.append((result.world, calibration_rows(result.sweep)))
    (old_world, old_calibration), (new_world, new_calibration) = tables
    assert old_world == new_world and old_calibration == new_calibration
    row = next(r for r in new_world if r.configuration == "wm-point")
    assert (row.predictions, row.invalid, row.labelled, row.bad_event_lines) == (6, 1, 4, 0)
    assert (row.would_skip, row.gate_precision, row.gate_recall) == (2, 0.5, 0.5)
    assert {(c.stage, c.mode) for c in new_calibration} == {("improve", "pointwise"), ("improve", "pairwise")}
