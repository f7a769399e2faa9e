"""Replies the agent cannot use as they stand, through the whole loop: broken tool arguments, replies cut
at max_tokens, vLLM's engine-side context error, and the usage such replies were billed with.

Reads the tiny competition fixture; writes a trial dir under tmp_path; real HTTP to scripted servers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import coder_reply, good_script, make_spec, read_events, review_responder
from fakeserver import Reply, prompt_text

from mle_world.agent.__main__ import build_agent
from mle_world.agent.journal import load_checkpoint
from mle_world.agent.llm.client import Backoff, storable_arguments
from mle_world.costs.account import role_row
from mle_world.costs.prices import Prices
from mle_world.records import AgentResult, BudgetSettings, LLMCallEvent, TrialSpec, WorldModelSettings

pytestmark = pytest.mark.timeout(60)
FAST = Backoff(base_s=0.01, cap_s=0.05)
ONE_STEP = BudgetSettings(time_limit_s=60, max_steps=1, min_step_s=0)
VLLM_ENGINE_400 = (
    "The decoder prompt (length 9001) is longer than the maximum model length of 8192. "
    "Make sure that `max_model_len` is no smaller than the number of text tokens."
)


def run(spec: TrialSpec) -> AgentResult:
    return build_agent(spec, backoff=FAST, kill_grace_s=1.0).run()


def llm_events(spec: TrialSpec, role: str) -> list[dict[str, Any]]:
    events = read_events(Path(spec.paths.trial_dir))
    return [e for e in events if e["type"] == "llm_call" and e["role"] == role]


def test_a_model_that_keeps_breaking_its_review_tool_call_is_no_outage(tmp_path, competition, servers):
    """Broken tool arguments are the model's output: a few resamples, then the reviewer's JSON fallback.
    The trial goes on; nothing is downtime (the budget never pauses for it); every reply's usage counts."""
    public, _ = competition
    servers["coder"].push(coder_reply(good_script(0.5)))

    def feedback(request: dict[str, Any]) -> Reply:
        if request.get("tools"):  # a review cut mid-argument, every time
            return Reply(garbage="bad_tool_args", finish_reason="length", usage=(700, 2048))
        return review_responder(request)

    servers["feedback"].default = feedback
    spec = make_spec(tmp_path, public, servers, budget=ONE_STEP, outage_window_s=2.0)
    result = run(spec)
    assert result.status == "completed" and result.best_metric == pytest.approx(0.5), result.stop_reason
    assert result.downtime_s == 0
    assert not [e for e in read_events(Path(spec.paths.trial_dir)) if e["type"] == "downtime"]
    requests = servers["feedback"].chat_requests
    # Seeded: each resample goes out with the next seed; then one JSON-fallback request.
    tool_seeds = [r["seed"] for r in requests if r.get("tools")]
    assert len(tool_seeds) == 4 and tool_seeds == list(range(tool_seeds[0], tool_seeds[0] + 4))
    assert [bool(r.get("tools")) for r in requests] == [True] * 4 + [False]
    assert "single JSON object" in prompt_text(requests[-1])
    events = llm_events(spec, "feedback")
    assert [e["outcome"] for e in events] == ["retry"] * 3 + ["ok", "ok"]
    assert "cut at max_tokens" in events[0]["error"] and events[3]["finish_reason"] == "length"
    # Every answer the server generated is billed once: the cost row's tokens are what it sent.
    sent = [s.usage for s in servers["feedback"].sent if s.usage]
    assert len(sent) == 5
    row = role_row(
        "feedback", [LLMCallEvent.model_validate(e) for e in events], Prices(version=1, as_of="2026-01-01")
    )
    assert (row.prompt_tokens, row.completion_tokens) == (
        sum(u[0] for u in sent),
        sum(u[1] for u in sent),
    )


def test_a_coder_reply_cut_at_max_tokens_is_asked_again(tmp_path, competition, servers, caplog):
    """A script cut off mid-block would only crash: the coder asks again (next seed) and says why."""
    public, _ = competition
    full = f"Plan.\n```python\n{good_script(0.5)}\n```"
    servers["coder"].push(Reply(content=full[: len(full) // 2], finish_reason="length"), Reply(content=full))
    spec = make_spec(tmp_path, public, servers, budget=ONE_STEP)
    result = run(spec)
    assert result.status == "completed" and result.best_metric == pytest.approx(0.5)
    ckpt = load_checkpoint(Path(spec.paths.trial_dir) / "journal.json")
    assert ckpt is not None and len(ckpt.nodes) == 1 and not ckpt.nodes[0].is_buggy
    assert ckpt.nodes[0].code.strip() == good_script(0.5).strip()
    seeds = [r["seed"] for r in servers["coder"].chat_requests]
    assert len(seeds) == 2 and seeds[1] != seeds[0]
    assert [e["finish_reason"] for e in llm_events(spec, "coder")] == ["length", "stop"]
    assert "draft reply cut at max_tokens (4096) before its code block closed" in caplog.text


def test_a_world_reply_cut_at_max_tokens_fails_open_and_says_so(tmp_path, competition, servers):
    public, _ = competition
    servers["coder"].push(coder_reply(good_script(0.5)), coder_reply(good_script(0.6)))
    cut = json.dumps({"rationale": "x" * 200, "p_bug": 0.9, "p_improves": 0.0, "confidence": 0.95})[:120]
    servers["world"].push(Reply(content=cut, finish_reason="length"))
    spec = make_spec(
        tmp_path,
        public,
        servers,
        regime="gated",
        configuration="wm-point",
        world=WorldModelSettings(enabled=True),
        budget=BudgetSettings(time_limit_s=60, max_steps=2, min_step_s=0),
    )
    result = run(spec)
    assert result.status == "completed"
    ckpt = load_checkpoint(Path(spec.paths.trial_dir) / "journal.json")
    assert ckpt is not None
    improve = ckpt.nodes[1]
    assert improve.executed and improve.prediction is not None and not improve.prediction.valid
    assert (improve.prediction.error or "").startswith("reply cut at max_tokens (4096; finish_reason=length)")


def test_vllms_engine_side_context_error_shrinks_the_prompt(tmp_path, competition, servers):
    """vLLM's engine words a prompt over max_model_len differently from its server ("maximum model length",
    not "context length"): it is a context overflow the coder shrinks, not an infra failure of the trial."""
    public, _ = competition
    servers["coder"].push(Reply(status=400, error_message=VLLM_ENGINE_400), coder_reply(good_script(0.5)))
    spec = make_spec(tmp_path, public, servers, budget=ONE_STEP)
    result = run(spec)
    assert result.status == "completed" and result.best_metric == pytest.approx(0.5), result.stop_reason
    assert len(servers["coder"].chat_requests) == 2


def test_a_server_error_that_echoes_the_key_stores_it_nowhere(tmp_path, competition, servers, monkeypatch):
    """Some gateways quote the credential they refused. The error text reaches events.jsonl (each
    attempt's error), result.json (the stop reason) and the infra cause: the client redacts its key."""
    public, _ = competition
    key = "sk-echoed-7d41c9e2"
    monkeypatch.setenv("ECHO_TEST_KEY", key)
    servers["coder"].push(
        Reply(status=502, error_message=f"upstream refused bearer {key}"),
        Reply(status=401, error_message=f"invalid api key {key}"),
    )
    spec = make_spec(tmp_path, public, servers, budget=ONE_STEP, key_env="ECHO_TEST_KEY")
    result = run(spec)
    assert servers["coder"].chat_requests[0]["_auth"] == f"Bearer {key}"  # the key was sent
    assert result.status == "failed" and "invalid api key [REDACTED:ECHO_TEST_KEY]" in result.stop_reason
    errors = [e["error"] for e in llm_events(spec, "coder")]
    assert len(errors) == 2 and all("[REDACTED:ECHO_TEST_KEY]" in e for e in errors), errors
    stored = [p for p in Path(spec.paths.trial_dir).rglob("*") if p.is_file()]
    assert stored and not [p for p in stored if key.encode() in p.read_bytes()]


def test_lone_surrogates_in_replies_are_stored_as_replacement_characters(tmp_path, competition, servers):
    """A JSON `\\ud800` escape decodes to a lone surrogate, which UTF-8 cannot encode: in a plan or a
    review's summary it failed the trial at its next checkpoint (journal.json, events.jsonl)."""
    public, _ = competition
    servers["coder"].push(coder_reply(good_script(0.5), plan="plan \ud800 end"))

    def feedback(request: dict[str, Any]) -> Reply:
        reply = review_responder(request)
        if reply.tool_call is not None:
            name, answer = reply.tool_call
            reply = Reply(tool_call=(name, {**answer, "summary": "ok \udfff"}), usage=reply.usage)
        return reply

    servers["feedback"].default = feedback
    spec = make_spec(tmp_path, public, servers, budget=ONE_STEP)
    result = run(spec)
    assert result.status == "completed" and result.best_metric == pytest.approx(0.5), result.stop_reason
    journal = json.loads((Path(spec.paths.trial_dir) / "journal.json").read_text(encoding="utf-8"))
    node = journal["nodes"][0]
    assert node["plan"].startswith("plan \ufffd end") and "\ufffd" in node["analysis"], node


def run_with_world_model(tmp_path: Path, public: Path, servers: dict[str, Any]) -> TrialSpec:
    """Two steps with the world model consulted (ungated); the trial must complete."""
    spec = make_spec(
        tmp_path,
        public,
        servers,
        world=WorldModelSettings(enabled=True),
        budget=BudgetSettings(time_limit_s=60, max_steps=2, min_step_s=0),
    )
    result = run(spec)
    assert result.status == "completed", result.stop_reason
    return spec


ESCAPED_SURROGATE = "\\ud83d"
"""A JSON escape of a lone high surrogate, as the model's text holds it (a backslash, then u)."""


def test_escaped_surrogates_in_text_answers_are_stored_as_replacement_characters(
    tmp_path, competition, servers
):
    """A world model's rationale, and a review answered as text rather than a tool call, were decoded
    from the reply's JSON text with their `\\ud83d` escapes as lone surrogates: the step's checkpoint and
    the final one failed, the trial left no result.json, and each retry replayed the same reply."""
    public, _ = competition
    servers["coder"].default = lambda r: coder_reply(good_script(0.5))

    def feedback(request: dict[str, Any]) -> Reply:
        reply = review_responder(request)
        answer = dict(reply.tool_call[1]) if reply.tool_call is not None else json.loads(reply.content or "")
        body = json.dumps({**answer, "summary": "ok"}).replace('"ok"', f'"ok {ESCAPED_SURROGATE}"')
        return Reply(content=body, usage=reply.usage)  # no tool call: the text is parsed

    servers["feedback"].default = feedback
    body = '{"p_bug": 0.1, "p_improves": 0.8, "confidence": 0.9, "rationale": "why X"}'
    servers["world"].default = lambda r: Reply(content=body.replace("X", ESCAPED_SURROGATE), usage=(50, 9))
    spec = run_with_world_model(tmp_path, public, servers)
    trial = Path(spec.paths.trial_dir)
    journal = json.loads((trial / "journal.json").read_text(encoding="utf-8"))
    assert all(n["analysis"] and "ok \ufffd" in n["analysis"] for n in journal["nodes"]), journal["nodes"]
    predictions = [e for e in read_events(trial) if e["type"] == "prediction"]
    assert predictions and all(p["prediction"]["rationale"] == "why \ufffd" for p in predictions), predictions


def test_json_nested_past_the_parsers_limit_is_no_answer(tmp_path, competition, servers):
    """Brackets nested deeper than the JSON parser recurses raised RecursionError out of the reply's
    parsing: the trial failed (as the harness's bug, retried, failing the same way again). Such a reply
    is now what it is: no JSON object, an invalid prediction (and tool-call arguments that are no JSON)."""
    public, _ = competition
    servers["coder"].default = lambda r: coder_reply(good_script(0.5))
    deep = '{"p_bug": ' + "[" * 100_000 + "}"
    servers["world"].default = lambda r: Reply(content=deep, usage=(50, 9))
    servers["feedback"].default = review_responder
    spec = run_with_world_model(tmp_path, public, servers)
    predictions = [e for e in read_events(Path(spec.paths.trial_dir)) if e["type"] == "prediction"]
    assert predictions and all(not p["prediction"]["valid"] for p in predictions), predictions
    assert storable_arguments(deep) == deep  # kept as the text it is, as other arguments that are no JSON
