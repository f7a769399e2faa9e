"""End-to-end loop tests: real HTTP to scripted fake endpoints, real script execution.

Reads the tiny competition fixture; writes a trial dir under tmp_path.
"""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import (
    buggy_script,
    candidate_index,
    coder_reply,
    counter_coder,
    good_script,
    make_spec,
    read_events,
    world_reply,
)
from fakeserver import FakeOpenAIServer, Reply, prompt_text

from mle_world.agent.__main__ import build_agent
from mle_world.agent.journal import Checkpoint, load_checkpoint
from mle_world.agent.llm.client import Backoff
from mle_world.agent.sandbox.interpreter import CodeRunner, ExecResult
from mle_world.agent.sandbox.jail import SandboxUnavailable
from mle_world.audit.sweep_costs import read_cost_totals
from mle_world.costs.account import write_trial_costs
from mle_world.costs.prices import load_prices
from mle_world.launch.verdict import classify
from mle_world.records import AgentResult, BudgetSettings, TrialSpec, WorldModelSettings

pytestmark = pytest.mark.timeout(60)
FAST = Backoff(base_s=0.01, cap_s=0.05)


def run(spec: TrialSpec) -> AgentResult:
    return build_agent(spec, backoff=FAST, kill_grace_s=1.0).run()


def journal(spec: TrialSpec) -> Checkpoint:
    ckpt = load_checkpoint(Path(spec.paths.trial_dir) / "journal.json")
    assert ckpt is not None
    return ckpt


def test_draft_bug_debug_improve(tmp_path, competition, servers):
    public, _ = competition
    servers["coder"].push(
        coder_reply(buggy_script(), "Draft plan."),
        coder_reply(good_script(0.5, tag="debugged"), "Fix the bug."),
        coder_reply(good_script(0.7, tag="improved"), "Improve it."),
    )
    spec = make_spec(tmp_path, public, servers)
    result = run(spec)
    trial = Path(spec.paths.trial_dir)

    assert result.status == "completed" and result.stop_reason == "max_steps"
    nodes = journal(spec).nodes
    assert [n.stage for n in nodes] == ["draft", "debug", "improve"]
    assert [n.is_buggy for n in nodes] == [True, False, False]
    assert nodes[0].exc_type == "ValueError" and "could not convert" in nodes[0].term_out
    assert nodes[1].parent_id == nodes[0].id and nodes[1].debug_depth == 1
    assert nodes[2].parent_id == nodes[1].id
    assert result.best_metric == pytest.approx(0.7) and result.best_node_id == nodes[2].id
    assert result.executed == 3 and result.skipped == 0 and result.buggy == 1
    assert (trial / "submission" / "submission.csv").read_text().startswith("id,target")
    assert "Validation metric: 0.7" in (trial / "best_solution.py").read_text()
    assert (trial / "result.json").exists()

    # The debug prompt shows the failing output; the improve prompt shows the parent's code.
    prompts = [prompt_text(r) for r in servers["coder"].chat_requests]
    assert "could not convert string" in prompts[1] and "Your previous solution had a bug" in prompts[1]
    assert "Validation metric: 0.5" in prompts[2] and "Memory" in prompts[2]
    assert "--debug" in prompts[0] and "./submission/" in prompts[0]
    # --debug ran before the full run for the good nodes; the buggy draft never got a full run.
    executions = [e for e in read_events(trial) if e["type"] == "execution"]
    assert [e["kind"] for e in executions] == ["debug", "debug", "full", "debug", "full"]
    # Review went through the submit_review tool.
    assert all(r.get("tool_choice") for r in servers["feedback"].chat_requests)


def test_usage_in_events_matches_what_the_server_returned(tmp_path, competition, servers):
    public, _ = competition
    servers["coder"].push(
        Reply(content=f"plan\n```python\n{good_script(0.5)}\n```", usage=(1234, 567)),
        Reply(content=f"plan\n```python\n{good_script(0.6)}\n```", usage=None),
    )
    spec = make_spec(
        tmp_path, public, servers, budget=BudgetSettings(time_limit_s=60, max_steps=2, min_step_s=0)
    )
    run(spec)
    events = [e for e in read_events(Path(spec.paths.trial_dir)) if e["type"] == "llm_call"]
    for role, server in servers.items():
        mine = [e for e in events if e["role"] == role and e["outcome"] == "ok"]
        # A completion without usage is used, its tokens unknown (None), never an "ok" with zero tokens.
        sent = [s for s in server.sent if s.status == 200]
        assert len(mine) == len(sent)
        assert [(e["prompt_tokens"], e["completion_tokens"]) for e in mine] == [
            s.usage or (None, None) for s in sent
        ]
    coder = [e for e in events if e["role"] == "coder"]
    assert [e["outcome"] for e in coder] == ["ok", "ok"] and coder[1]["prompt_tokens"] is None
    assert {e["model"] for e in coder} == {"fake-coder"}  # discovered from /v1/models
    # Through the cost CSV: the coder's tokens count the call that reported them, the other is unknown,
    # so the role (and the trial) is not priced per token: never a cost that looks complete.
    output = tmp_path / "sweep"
    write_trial_costs(Path(spec.paths.trial_dir), spec, output, load_prices())
    with open(
        output / "costs" / f"{spec.configuration}.{spec.task}.seed{spec.seed}.csv", newline=""
    ) as handle:
        coder_row = next(r for r in csv.DictReader(handle) if r["role"] == "coder")
    assert (coder_row["calls"], coder_row["calls_unknown_usage"]) == ("2", "1")
    assert coder_row["prompt_tokens"] == "1234" and coder_row["pricing"] != "per-token"
    totals, bad = read_cost_totals(str(output / "costs"))
    assert not bad and totals[spec.trial_id].tokens == 1234 + 567 + sum(
        sum(s.usage or (0, 0))
        for role in ("feedback", "world")
        for s in servers[role].sent
        if s.status == 200
    )


def _world_spec(tmp_path, public, servers, regime, max_steps=3, **world):
    settings = WorldModelSettings(enabled=True, **world)
    return make_spec(
        tmp_path,
        public,
        servers,
        regime=regime,
        configuration="wm-point",
        world=settings,
        budget=BudgetSettings(
            time_limit_s=120, max_steps=max_steps, exec_timeout_s=20, debug_timeout_s=10, min_step_s=0
        ),
    )


@pytest.mark.parametrize("regime", ["gated", "ungated"])
def test_gate_skips_rejected_candidate_only_when_gated(tmp_path, competition, servers, regime):
    public, _ = competition
    servers["coder"].push(
        coder_reply(good_script(0.5, tag="draft")),
        coder_reply(good_script(0.4, tag="rejected")),
        coder_reply(good_script(0.8, tag="accepted")),
    )
    servers["world"].push(world_reply(0.1, confidence=0.9), world_reply(0.9, confidence=0.9))
    # The step limit counts executions: the gated trial's veto costs no step (2 executions, 3 nodes).
    spec = _world_spec(tmp_path, public, servers, regime, max_steps=2 if regime == "gated" else 3)
    result = run(spec)
    trial = Path(spec.paths.trial_dir)
    nodes = journal(spec).nodes
    ran = {p.name for p in (trial / "workspace" / "working").iterdir()}

    assert [n.stage for n in nodes] == ["draft", "improve", "improve"]
    assert nodes[0].prediction is None  # world model applies to improve only
    assert len(servers["world"].chat_requests) == 2
    predictions = [e for e in read_events(trial) if e["type"] == "prediction"]
    assert len(predictions) == 2
    if regime == "gated":
        assert nodes[1].skipped and not nodes[1].executed and nodes[1].gate == "skip"
        assert "ran_rejected_debug" not in ran
        assert result.skipped == 1 and result.executed == 2
        assert predictions[0]["gate"] == "skip" and predictions[0]["executed"] is False
        assert predictions[0]["actual_buggy"] is None
    else:
        assert nodes[1].executed and nodes[1].gate == "not_gated"
        assert "ran_rejected_full" in ran
        assert result.skipped == 0 and result.executed == 3
        first = predictions[0]
        assert first["gate"] == "not_gated" and first["executed"] is True
        assert first["actual_buggy"] is False and first["actual_improved"] is False
        assert first["actual_metric"] == pytest.approx(0.4)
    last = predictions[-1]
    assert last["executed"] and last["actual_improved"] is True and last["prediction"]["p_improves"] == 0.9
    assert result.best_metric == pytest.approx(0.8)


def test_gate_forces_execution_after_max_consecutive_skips(tmp_path, competition, servers):
    public, _ = competition
    servers["coder"].default = counter_coder()
    servers["world"].default = lambda request: world_reply(0.05, confidence=0.95)
    spec = make_spec(
        tmp_path,
        public,
        servers,
        regime="gated",
        world=WorldModelSettings(enabled=True, max_consecutive_skips=2),
        budget=BudgetSettings(time_limit_s=120, max_steps=3, min_step_s=0),
    )
    result = run(spec)
    gates = [n.gate for n in journal(spec).nodes]
    # Vetoed steps cost no step: 3 executions take the draft plus two rounds of skip, skip, forced.
    assert gates == [None, "skip", "skip", "forced", "skip", "skip", "forced"]
    assert result.executed == 3 and result.vetoed_steps == 4 and result.steps == 7


def test_low_confidence_and_malformed_predictions_fail_open(tmp_path, competition, servers):
    public, _ = competition
    servers["coder"].default = counter_coder()
    servers["world"].push(
        Reply(content="I believe this will work well, no JSON here."),
        Reply(content='{"p_bug": 1.5, "p_improves": 0.1, "confidence": 0.3}'),
    )
    spec = _world_spec(tmp_path, public, servers, "gated")
    result = run(spec)
    nodes = journal(spec).nodes
    assert [n.executed for n in nodes] == [True, True, True]
    assert [n.gate for n in nodes[1:]] == ["execute", "execute"]
    assert nodes[1].prediction is not None and not nodes[1].prediction.valid
    # Only the bad field is dropped; the low confidence keeps the rest from gating.
    assert "outside [0, 1]" in (nodes[2].prediction.error or "") and nodes[2].prediction.p_bug is None
    predictions = [e for e in read_events(Path(spec.paths.trial_dir)) if e["type"] == "prediction"]
    assert [p["prediction"]["valid"] for p in predictions] == [False, True]
    assert result.status == "completed"


def test_rank_among_concurrent_candidates(tmp_path, competition, servers):
    public, _ = competition
    servers["coder"].default = lambda r: coder_reply(good_script(0.5 + candidate_index(r) / 10, tag="rank"))

    def world(request):
        text = prompt_text(request)
        metric = float(text.split("Validation metric: ")[-1].split('"')[0].split("\n")[0])
        return world_reply(metric, confidence=0.9)

    servers["world"].default = world
    spec = make_spec(
        tmp_path,
        public,
        servers,
        regime="gated",
        world=WorldModelSettings(enabled=True, candidates=4, threshold=0.5),
        budget=BudgetSettings(time_limit_s=120, max_steps=5, min_step_s=0),
    )
    run(spec)
    nodes = journal(spec).nodes
    group = [n for n in nodes if n.group == 1]
    assert len(group) == 4
    (chosen,) = [n for n in group if n.executed]
    assert chosen.candidate == 3 and chosen.gate == "execute" and chosen.prediction.rank == 0
    assert sorted(n.gate for n in group) == ["execute", "not_selected", "not_selected", "not_selected"]


def oracle_compare(request):
    """A pairwise world model that knows the truth: the solution whose script prints the higher metric."""
    text = prompt_text(request)
    section_a = text.split("Solution A", 1)[1].split("Solution B", 1)[0]
    section_b = text.split("Solution B", 1)[1]

    def metric(section):
        return float(section.split("Validation metric: ")[1].split('"')[0].split("\n")[0])

    better = "A" if metric(section_a) > metric(section_b) else "B"
    return Reply(content=json.dumps({"better": better, "confidence": 0.9, "rationale": "oracle"}))


def test_pairwise_tournament(tmp_path, competition, servers):
    public, _ = competition
    servers["coder"].default = lambda r: coder_reply(good_script(0.5 + candidate_index(r) / 10))
    servers["world"].default = oracle_compare
    spec = make_spec(
        tmp_path,
        public,
        servers,
        regime="gated",
        world=WorldModelSettings(enabled=True, candidates=4, selection="pairwise", pairwise_confidence=0.7),
        budget=BudgetSettings(time_limit_s=120, max_steps=5, min_step_s=0),
    )
    run(spec)
    nodes = journal(spec).nodes
    group = [n for n in nodes if n.group == 1]
    (chosen,) = [n for n in group if n.executed]
    # Three matches find the best candidate (metric 0.8), then it is compared with the best so far.
    assert chosen.candidate == 3 and chosen.gate == "execute"
    assert len(chosen.prediction.comparisons) == 3
    assert chosen.prediction.p_improves == pytest.approx(0.9)
    assert sorted(n.gate for n in group) == ["execute", "not_selected", "not_selected", "not_selected"]
    assert len(servers["world"].chat_requests) % 4 == 0  # 3 matches + 1 against the best per step


def test_pairwise_positions_are_seeded_random(tmp_path, competition, servers):
    """Position bias must not flow into the gate: the best so far is not always shown as A."""
    public, _ = competition
    servers["coder"].default = lambda r: coder_reply(good_script(0.5 + candidate_index(r) / 10))
    servers["world"].default = oracle_compare
    spec = make_spec(
        tmp_path,
        public,
        servers,
        regime="gated",
        world=WorldModelSettings(enabled=True, candidates=2, selection="pairwise"),
        budget=BudgetSettings(time_limit_s=120, max_steps=6, min_step_s=0),
    )
    run(spec)
    versus = [
        c for n in journal(spec).nodes if n.prediction for c in n.prediction.comparisons if c.versus_best
    ]
    ids = {n.id: n for n in journal(spec).nodes}
    best_first = [ids[c.a].group < ids[c.b].group for c in versus]
    assert len(versus) >= 5 and 0 < sum(best_first) < len(versus)


def test_pairwise_rejects_when_best_confidently_wins(tmp_path, competition, servers):
    public, _ = competition
    servers["coder"].push(coder_reply(good_script(0.9, tag="draft")))
    servers["coder"].default = lambda r: coder_reply(good_script(0.3 + candidate_index(r) / 10))
    servers["world"].default = oracle_compare
    spec = make_spec(
        tmp_path,
        public,
        servers,
        regime="gated",
        world=WorldModelSettings(enabled=True, candidates=2, selection="pairwise"),
        budget=BudgetSettings(time_limit_s=120, max_steps=2, min_step_s=0),
    )
    run(spec)
    nodes = journal(spec).nodes
    by_group = [sorted(n.gate or "" for n in nodes if n.group == g) for g in range(5)]
    assert by_group == [[""]] + [["not_selected", "skip"]] * 3 + [["forced", "not_selected"]]


def test_feedback_server_without_tools_uses_json_fallback(tmp_path, competition, servers):
    public, _ = competition
    servers["feedback"].reject_tools = True
    servers["coder"].default = counter_coder()
    spec = make_spec(
        tmp_path, public, servers, budget=BudgetSettings(time_limit_s=60, max_steps=2, min_step_s=0)
    )
    result = run(spec)
    assert result.status == "completed" and result.best_metric == pytest.approx(0.6)
    requests = servers["feedback"].chat_requests
    # One rejected request with tools, then JSON-only requests for the rest of the trial.
    assert [bool(r.get("tools")) for r in requests] == [True, False, False]
    assert "single JSON object" in prompt_text(requests[1])


def test_review_reply_without_tool_call_is_read_as_json(tmp_path, competition, servers):
    public, _ = competition
    servers["coder"].default = counter_coder()
    answer = {
        "is_bug": False,
        "has_csv_submission": True,
        "summary": "ok",
        "metric": 3,
        "lower_is_better": True,
    }
    servers["feedback"].default = lambda r: Reply(content=f"Here you go: {json.dumps(answer)}")
    spec = make_spec(
        tmp_path, public, servers, budget=BudgetSettings(time_limit_s=60, max_steps=1, min_step_s=0)
    )
    result = run(spec)
    # The script printed 0.5; the reviewer's 3 is recorded beside it and flagged, the printed one used.
    assert result.best_metric == 0.5 and result.lower_is_better is True and result.metric_mismatches == 1
    node = journal(spec).nodes[0]
    assert node.reviewer_metric == 3.0 and node.printed_metric == 0.5 and node.metric_mismatch


def test_missing_submission_makes_node_buggy(tmp_path, competition, servers):
    public, _ = competition
    no_csv = 'print("Validation metric: 0.9")\n'
    servers["coder"].push(coder_reply(no_csv))
    servers["feedback"].default = lambda r: Reply(
        tool_call=(
            "submit_review",
            {
                "is_bug": False,
                "has_csv_submission": True,
                "summary": "ok",
                "metric": 0.9,
                "lower_is_better": False,
            },
        )
    )
    spec = make_spec(
        tmp_path, public, servers, budget=BudgetSettings(time_limit_s=60, max_steps=1, min_step_s=0)
    )
    result = run(spec)
    node = journal(spec).nodes[0]
    assert node.is_buggy and node.metric is None and not node.has_submission
    assert result.best_metric is None and not result.has_submission and result.status == "completed"


def test_endpoint_down_for_a_while_recovers(tmp_path, competition, servers):
    public, _ = competition
    servers["coder"].default = counter_coder()
    servers["coder"].fail_next(2, status=503)
    servers["feedback"].fail_next(1, status=429)
    spec = make_spec(
        tmp_path,
        public,
        servers,
        outage_window_s=30.0,
        budget=BudgetSettings(time_limit_s=60, max_steps=1, min_step_s=0),
    )
    result = run(spec)
    assert result.status == "completed" and result.best_metric == pytest.approx(0.5)
    events = [e for e in read_events(Path(spec.paths.trial_dir)) if e["type"] == "llm_call"]
    outcomes = [(e["role"], e["outcome"]) for e in events]
    assert outcomes == [
        ("coder", "retry"),
        ("coder", "retry"),
        ("coder", "ok"),
        ("feedback", "retry"),
        ("feedback", "ok"),
    ]
    assert all(e["prompt_tokens"] is None for e in events if e["outcome"] == "retry")


def test_endpoint_down_for_good_fails_the_trial(tmp_path, competition, servers):
    public, _ = competition
    servers["coder"].default = counter_coder()
    dead = FakeOpenAIServer()
    dead_url = dead.url
    dead.stop()  # the port is closed: connection refused
    spec = make_spec(
        tmp_path,
        public,
        servers,
        urls={"feedback": dead_url},
        outage_window_s=1.0,
        budget=BudgetSettings(time_limit_s=60, max_steps=2, min_step_s=0),
    )
    result = run(spec)
    assert result.status == "failed"
    assert result.stop_reason.startswith("endpoint_unavailable: feedback")
    saved = AgentResult.model_validate_json((Path(spec.paths.trial_dir) / "result.json").read_text())
    assert saved.status == "failed"
    assert (Path(spec.paths.trial_dir) / "journal.json").exists()


class BrokenRunner:
    """A runner whose `run` raises what no script can make it raise: a bug of the harness's own (or,
    given `error`, that)."""

    def __init__(self, real: CodeRunner, error: Exception | None = None) -> None:
        self.real, self.error = real, error

    def run(self, code: str, **kwargs: Any) -> ExecResult:
        raise self.error or KeyError("a bug of ours")

    def terminate(self) -> None:
        self.real.terminate()


def test_a_bug_of_the_harness_fails_the_trial_as_internal_not_as_the_agents(tmp_path, competition, servers):
    """An exception the loop did not expect is the harness's failure: the trial is missing (retried by
    `--retry-failed`), not a settled zero that moves the configuration's medal rate."""
    public, _ = competition
    servers["coder"].default = counter_coder()
    spec = make_spec(
        tmp_path, public, servers, budget=BudgetSettings(time_limit_s=60, max_steps=2, min_step_s=0)
    )
    agent = build_agent(spec, backoff=FAST, kill_grace_s=1.0)
    agent.services = dataclasses.replace(agent.services, runner=BrokenRunner(agent.services.runner))
    result = agent.run()
    assert result.status == "failed" and result.stop_reason.startswith("internal: KeyError: "), result
    saved = AgentResult.model_validate_json((Path(spec.paths.trial_dir) / "result.json").read_text())
    assert saved.stop_reason == result.stop_reason
    verdict = classify(1, saved, timed_out=False, limit_text="60", last_line="")
    assert (verdict.state, verdict.failure_class) == ("failed", "infra"), verdict
    # What an agent of an image built before `internal:` writes for the same bug is no settled zero either.
    legacy = saved.model_copy(update={"stop_reason": "error: KeyError: 'a bug of ours'"})
    assert classify(1, legacy, timed_out=False, limit_text="60", last_line="").failure_class == "infra"


def test_a_sandbox_that_fails_during_the_trial_fails_it_as_the_nodes(tmp_path, competition, servers):
    """A run the sandbox could not start is the node's failure (as at the agent's start), not internal."""
    public, _ = competition
    servers["coder"].default = counter_coder()
    spec = make_spec(
        tmp_path, public, servers, budget=BudgetSettings(time_limit_s=60, max_steps=2, min_step_s=0)
    )
    agent = build_agent(spec, backoff=FAST, kill_grace_s=1.0)
    error = SandboxUnavailable("the sandbox did not start the script (exit 1: bwrap: No space left)")
    agent.services = dataclasses.replace(agent.services, runner=BrokenRunner(agent.services.runner, error))
    result = agent.run()
    assert result.stop_reason.startswith("sandbox_unavailable: the sandbox did not start"), result.stop_reason
    assert classify(1, result, timed_out=False, limit_text="60", last_line="").failure_class == "infra"


def test_a_full_disk_under_the_agents_copy_of_a_submission_is_no_buggy_node(tmp_path, competition, servers):
    """ENOSPC while the agent copied the script's submission out was taken for "no submission was
    written": the node buggy, the trial completed and graded as if the script had failed."""
    public, _ = competition
    servers["coder"].push(coder_reply(good_script(0.7)))
    spec = make_spec(
        tmp_path, public, servers, budget=BudgetSettings(time_limit_s=60, max_steps=1, min_step_s=0)
    )
    agent = build_agent(spec, backoff=FAST, kill_grace_s=1.0)
    staged = agent.layout.staged_submission
    staged.parent.mkdir(parents=True, exist_ok=True)
    staged.with_name(f".{staged.name}.tmp").symlink_to("/dev/full")  # every write: ENOSPC
    result = agent.run()
    assert result.status == "failed" and result.stop_reason.startswith("infra: OSError: "), result.stop_reason
    assert classify(1, result, timed_out=False, limit_text="60", last_line="").failure_class == "infra"
    assert not journal(spec).nodes  # the step did not end: a retry runs it again


def test_world_endpoint_down_fails_the_trial_and_never_decides_the_step(tmp_path, competition, servers):
    """A world model that does not answer is no invalid prediction: after the outage window the trial
    fails as infra, and the step it could not predict is neither executed nor skipped."""
    public, _ = competition
    servers["coder"].default = counter_coder()
    servers["world"].default = lambda r: world_reply(0.9)
    servers["world"].outage(None, after_requests=1)
    spec = _world_spec(tmp_path, public, servers, "gated", max_steps=4)  # outage window: 2 s
    result = run(spec)
    assert result.status == "failed" and result.stop_reason.startswith("endpoint_unavailable: world")
    nodes = journal(spec).nodes
    assert [(n.stage, n.gate, n.executed) for n in nodes] == [
        ("draft", None, True),
        ("improve", "execute", True),
    ]
    predictions = [e for e in read_events(Path(spec.paths.trial_dir)) if e["type"] == "prediction"]
    assert [p["node_id"] for p in predictions] == [nodes[1].id]


def test_time_budget_exhausted(tmp_path, competition, servers):
    public, _ = competition
    servers["coder"].default = counter_coder(sleep_s=30)
    spec = make_spec(
        tmp_path,
        public,
        servers,
        budget=BudgetSettings(
            time_limit_s=3, max_steps=100, exec_timeout_s=60, debug_timeout_s=10, min_step_s=0.5
        ),
    )
    result = run(spec)
    assert result.stop_reason == "time_limit" and result.status == "completed"
    assert result.time_used_s < 3 + 2.0
    node = journal(spec).nodes[0]
    assert node.timed_out and node.is_buggy and node.exc_type == "TimeoutError"
    full = [
        e for e in read_events(Path(spec.paths.trial_dir)) if e["type"] == "execution" and e["kind"] == "full"
    ]
    assert full[0]["timeout_s"] < 3  # min(exec timeout, time left)


def test_final_ensembling_stage_shows_best_nodes(tmp_path, competition, servers):
    public, _ = competition
    servers["coder"].default = counter_coder()
    spec = make_spec(
        tmp_path,
        public,
        servers,
        budget=BudgetSettings(time_limit_s=600, max_steps=5, min_step_s=0),
    )
    run(spec)
    prompts = [prompt_text(r) for r in servers["coder"].chat_requests]
    assert "mini training" in prompts[0] and "Best solutions so far" not in prompts[0]
    # step 4 of 5: progress 0.8 -> final ensembling with the best 2 nodes' code.
    assert "final ensembling" in prompts[4] and "Best solutions so far (for ensembling)" in prompts[4]
    assert "Validation metric: 0.8" in prompts[4] and "Validation metric: 0.7" in prompts[4]


def test_seeded_runs_make_the_same_decisions(tmp_path, competition, servers):
    public, _ = competition
    servers["coder"].default = lambda r: coder_reply(good_script(0.5 + candidate_index(r) / 10))
    servers["world"].default = lambda r: world_reply(0.9)
    world = WorldModelSettings(enabled=True, candidates=3)
    chosen = []
    for attempt in range(2):
        spec = (
            make_spec(
                tmp_path / f"run{attempt}",
                public,
                servers,
                world=world,
                budget=BudgetSettings(time_limit_s=120, max_steps=7, min_step_s=0),
            )
            if (tmp_path / f"run{attempt}").mkdir() is None
            else None
        )
        assert spec is not None
        run(spec)
        chosen.append([n.candidate for n in journal(spec).nodes if n.executed])
    assert chosen[0] == chosen[1]


@pytest.mark.parametrize("context", ["full", "blind"])
def test_world_context_and_all_stages(tmp_path, competition, servers, context):
    public, _ = competition
    servers["coder"].default = counter_coder()
    servers["world"].default = lambda r: world_reply(0.9)
    spec = make_spec(
        tmp_path,
        public,
        servers,
        regime="gated",
        world=WorldModelSettings(enabled=True, applies_to=("draft", "debug", "improve"), context=context),
        budget=BudgetSettings(time_limit_s=120, max_steps=2, min_step_s=0),
    )
    run(spec)
    nodes = journal(spec).nodes
    assert all(n.prediction is not None and n.gate == "execute" for n in nodes)
    prompts = [prompt_text(r) for r in servers["world"].chat_requests]
    assert len(prompts) == 2 and all("Tiny task" in p for p in prompts)
    if context == "blind":
        assert not any("Parent solution" in p or "Data Overview" in p for p in prompts)
    else:
        assert (
            "Data Overview" in prompts[0] and "Parent solution" in prompts[1] and "Best so far" in prompts[1]
        )


def test_world_model_disabled_makes_no_world_calls(tmp_path, competition, servers):
    public, _ = competition
    servers["coder"].default = counter_coder()
    spec = make_spec(tmp_path, public, servers, world=WorldModelSettings(enabled=False, candidates=4))
    result = run(spec)
    assert servers["world"].chat_requests == [] and result.steps == 3 and result.skipped == 0
