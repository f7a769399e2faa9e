"""Constrained decoding of world-model and review replies: the request's `response_format` per setting.

Reads tests/agent/golden/structured_output/*.json; talks to the fake OpenAI server on loopback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from fakeserver import FakeOpenAIServer, Reply

from mle_world.agent.events import MemorySink
from mle_world.agent.journal import Node
from mle_world.agent.llm.client import Backoff, EndpointClient, EndpointFailure
from mle_world.agent.llm.structured import PROBABILITY_GRID, response_format
from mle_world.agent.prompts import REVIEW_TOOL, WorldContext
from mle_world.agent.review import REVIEW_SCHEMA, Reviewer, ReviewReply
from mle_world.agent.world import (
    COMPARISON_SCHEMA,
    PREDICTION_SCHEMA,
    ComparisonReply,
    PredictionReply,
    WorldModel,
)
from mle_world.errors import ConfigError
from mle_world.identity import science_of, trial_hash
from mle_world.plan.config import load_paper_config, packaged_config
from mle_world.records import EndpointSettings, LLMCallEvent, Role, StructuredOutput

pytestmark = pytest.mark.timeout(30)
GOLDEN = Path(__file__).parent / "golden" / "structured_output"
PREDICTION = {"p_bug": 0.2, "p_improves": 0.7, "predicted_metric": 0.9, "confidence": 0.8, "rationale": "ok"}
CTX = WorldContext(task="Predict y.", blind=False, has_best=False)
CANDIDATE = Node(id="n1", step=0, stage="draft", plan="Fit a tree.", code="print(1)")


def client(server: FakeOpenAIServer, role: Role, setting: StructuredOutput) -> EndpointClient:
    settings = EndpointSettings(url=server.url, model="m", structured_output=setting)
    return EndpointClient(role, settings, MemorySink(), backoff=Backoff(base_s=0.01, cap_s=0.04))


def golden(name: str, value: Any) -> None:
    """Compare with the recorded file; delete it to record it again."""
    path = GOLDEN / f"{name}.json"
    text = json.dumps(value, indent=2) + "\n"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert json.loads(path.read_text()) == value, f"{path} differs (delete it to re-record)"


@pytest.mark.parametrize("setting", ["json_schema", "json_object"])
def test_a_prediction_request_carries_the_reply_models_schema(setting: StructuredOutput) -> None:
    with FakeOpenAIServer() as server:
        server.push(json.dumps(PREDICTION))
        prediction = WorldModel(client(server, "world", setting), 1.0).predict(CTX, CANDIDATE)
        (request,) = server.chat_requests
    assert prediction.valid and prediction.p_improves == 0.7
    golden(f"predict-{setting}", request["response_format"])
    schema = (
        request["response_format"]["json_schema"]["schema"]
        if setting == "json_schema"
        else request["response_format"]["schema"]
    )
    derived = {k: v for k, v in PredictionReply.model_json_schema().items() if k != "description"}
    if setting == "json_object":
        # llama-cpp-python ignores minimum/maximum: the probabilities go as the enum of their grid.
        for name in ("p_bug", "p_improves", "confidence"):
            bounded = derived["properties"][name]
            assert (bounded.pop("minimum"), bounded.pop("maximum")) == (0.0, 1.0)
            bounded["enum"] = list(PROBABILITY_GRID)
    assert schema == derived
    assert schema["required"] == ["p_bug", "p_improves", "predicted_metric", "confidence", "rationale"]
    assert schema["additionalProperties"] is False


def test_a_comparison_request_carries_its_schema() -> None:
    with FakeOpenAIServer() as server:
        server.push('{"better": "B", "confidence": 0.9, "rationale": "r"}')
        comparison = WorldModel(client(server, "world", "json_schema"), 1.0).compare(
            CTX, CANDIDATE, CANDIDATE
        )
        (request,) = server.chat_requests
    assert comparison.valid and comparison.better == "B"
    assert request["response_format"] == response_format("json_schema", COMPARISON_SCHEMA)
    assert request["response_format"]["json_schema"]["name"] == "ComparisonReply"
    assert ComparisonReply.model_json_schema()["properties"]["better"]["enum"] == ["A", "B"]


def test_off_means_no_response_format() -> None:
    with FakeOpenAIServer() as server:
        server.push(json.dumps(PREDICTION), '{"better": "A", "confidence": 0.9, "rationale": "r"}')
        world = WorldModel(client(server, "world", "none"), 1.0)
        world.predict(CTX, CANDIDATE)
        world.compare(CTX, CANDIDATE, CANDIDATE)
        assert [r.get("response_format", "absent") for r in server.chat_requests] == ["absent", "absent"]


def test_the_schema_is_not_enforced_on_the_reply() -> None:
    """A server may ignore the schema: the reply is parsed and validated as without it."""
    with FakeOpenAIServer() as server:
        server.push('Sure! ```json\n{"p_bug": "0.3", "p_improves": 1.5, "confidence": 0.9}\n```')
        prediction = WorldModel(client(server, "world", "json_schema"), 1.0).predict(CTX, CANDIDATE)
    assert prediction.valid and prediction.p_bug == 0.3 and prediction.p_improves is None
    assert "p_improves outside [0, 1]" in (prediction.error or "")


def test_a_server_refusing_the_format_is_asked_again_without_it_for_the_rest_of_the_trial() -> None:
    sink = MemorySink()
    with FakeOpenAIServer(response_formats=("text", "json_object")) as server:
        settings = EndpointSettings(url=server.url, model="m", structured_output="json_schema")
        world = WorldModel(EndpointClient("world", settings, sink), 1.0)
        server.push(json.dumps(PREDICTION), json.dumps(PREDICTION))
        first = world.predict(CTX, CANDIDATE)
        second = world.predict(CTX, CANDIDATE)
        sent = [(s.status, s.request.get("response_format", {}).get("type")) for s in server.sent]
    assert first.valid and second.valid
    assert sent == [(500, "json_schema"), (200, None), (200, None)]
    outcomes = [e.outcome for e in sink.events if isinstance(e, LLMCallEvent)]
    assert outcomes == ["error", "ok", "ok"]


def test_an_outage_is_no_refusal_of_the_format() -> None:
    with FakeOpenAIServer() as server:
        server.fail_next(1, status=500)
        server.push(json.dumps(PREDICTION))
        world = WorldModel(client(server, "world", "json_schema"), 1.0)
        assert world.predict(CTX, CANDIDATE).valid
        assert [r["response_format"]["type"] for r in server.chat_requests] == ["json_schema"] * 2


def test_another_rejection_is_no_refusal_of_the_format() -> None:
    with FakeOpenAIServer() as server:
        server.push(Reply(status=400, error_message="temperature must be non-negative"))
        with pytest.raises(EndpointFailure, match="request rejected"):
            WorldModel(client(server, "world", "json_schema"), 1.0).predict(CTX, CANDIDATE)
        assert len(server.chat_requests) == 1


def test_the_review_json_fallback_carries_the_review_schema_and_the_tool_call_does_not() -> None:
    with FakeOpenAIServer(reject_tools=True) as server:
        reply = {"is_bug": False, "has_csv_submission": True, "summary": "s", "metric": 0.5}
        server.push(json.dumps({**reply, "lower_is_better": False}))
        node = CANDIDATE.model_copy(update={"term_out": "Validation metric: 0.5"})
        review = Reviewer(client(server, "feedback", "json_object"), "task").review(node, True)
        tools_request, json_request = server.chat_requests
    assert review.parsed and review.metric == 0.5
    assert "response_format" not in tools_request and tools_request["tools"]
    assert json_request["response_format"] == {"type": "json_object", "schema": dict(REVIEW_SCHEMA.schema)}
    golden("review-json_object", json_request["response_format"])


def test_the_review_schema_is_the_review_tools_parameters() -> None:
    tool = REVIEW_TOOL["function"]["parameters"]
    schema = ReviewReply.model_json_schema()
    assert list(schema["properties"]) == list(tool["properties"])
    assert schema["required"] == tool["required"]
    for name, spec in tool["properties"].items():
        assert schema["properties"][name]["description"] == spec["description"]


def test_the_schemas_compile_to_llama_cpp_grammars_without_its_any_json_fallback() -> None:
    """llama-cpp-python's server silently falls back to "any JSON object" for a schema its converter
    cannot compile; these must compile (the converter raises where the server would fall back)."""
    grammar = pytest.importorskip("llama_cpp.llama_grammar")
    for reply in (PREDICTION_SCHEMA, COMPARISON_SCHEMA, REVIEW_SCHEMA):
        gbnf = grammar.json_schema_to_gbnf(json.dumps(dict(reply.schema)))
        assert all(name in gbnf for name in reply.schema["properties"])
        grammar.LlamaGrammar.from_string(gbnf, verbose=False)


def write_config(tmp_path: Path, role: str, setting: str) -> Path:
    data = yaml.safe_load(packaged_config("demo.yaml").read_text())
    data["endpoints"][role]["structured_output"] = setting
    path = tmp_path / "demo.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_coder_role_cannot_ask_for_json(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"endpoints: coder.structured_output: only the world and feedback"):
        load_paper_config(write_config(tmp_path, "coder", "json_schema"), lambda task: True)


def test_an_unknown_setting_names_the_field(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"endpoints.world.structured_output: Input should be 'none'"):
        load_paper_config(write_config(tmp_path, "world", "grammar"), lambda task: True)


def test_off_keeps_the_science_hash_and_on_changes_it() -> None:
    paper = load_paper_config(packaged_config("paper.yaml"), lambda task: True)
    settings = paper.agent_settings("wm-point")
    assert all("structured_output" not in e for e in science_of(settings)["endpoints"].values())
    world = settings.endpoints["world"].model_copy(update={"structured_output": "json_schema"})
    on = settings.model_copy(update={"endpoints": {**settings.endpoints, "world": world}})
    assert science_of(on)["endpoints"]["world"]["structured_output"] == "json_schema"
    args = ("gated", "wm-point", "spooky-author-identification", 34)
    assert trial_hash(*args, settings) != trial_hash(*args, on)
