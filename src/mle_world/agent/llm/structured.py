"""Constrained decoding: the `response_format` a request carries for its reply's JSON schema.

Reads an endpoint's `structured_output` setting and a reply model's JSON schema; writes nothing.

Two request shapes exist. OpenAI's `{"type": "json_schema", "json_schema": {"name", "schema",
"strict"}}` is what vLLM, llama.cpp's own `llama-server` and OpenAI accept. llama-cpp-python's server
(the demo's) validates `type` against "text" and "json_object" and answers 422 to it; it takes
`{"type": "json_object", "schema": {...}}` and compiles the schema to a grammar (falling back to any
JSON object when the schema uses what its converter lacks). Servers may also ignore the field: a reply
is parsed and validated as without it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import openai
import pydantic

from mle_world.records import StructuredOutput

_REFUSAL_MARKERS = ("response_format", "json_schema", "schema", "grammar", "structured", "guided")
"""Words of a 400/422 that refuses the format itself: llama-cpp-python's 422 names the field
(`body.response_format.type`), vLLM's and OpenAI's 400s the schema or the grammar it compiled to."""


@dataclass(frozen=True)
class ReplySchema:
    """The JSON object a request's reply must be: a name (OpenAI's `json_schema.name`) and its schema."""

    name: str
    schema: Mapping[str, Any]

    @classmethod
    def of(cls, model: type[pydantic.BaseModel]) -> ReplySchema:
        """The schema pydantic derives from a reply model (`model_json_schema`), without the class
        docstring (it documents the code, not the reply)."""
        schema = model.model_json_schema()
        schema.pop("description", None)
        return cls(model.__name__, schema)


PROBABILITY_GRID = tuple(round(i * 0.05, 2) for i in range(21))
"""The values a probability may take under llama-cpp-python's grammar (0.0, 0.05, ..., 1.0)."""


def _enumerate_probabilities(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The schema with each number bounded to [0, 1] given as the enum `PROBABILITY_GRID`.

    llama-cpp-python's schema converter (0.3.36) does not turn `minimum`/`maximum` into grammar rules, so the
    270M demo model then writes `"p_bug": 29401`, which validation drops: the prediction is as invalid
    as without a schema. An enum of the same range is what its grammar can enforce.
    """
    properties = {}
    for name, field in schema.get("properties", {}).items():
        if field.get("type") == "number" and field.get("minimum") == 0 and field.get("maximum") == 1:
            rest = {k: v for k, v in field.items() if k not in ("minimum", "maximum")}
            field = {**rest, "enum": list(PROBABILITY_GRID)}
        properties[name] = field
    return {**schema, "properties": properties}


def response_format(setting: StructuredOutput, reply: ReplySchema) -> dict[str, Any] | None:
    """The request's `response_format` for an endpoint's setting; None for `none`."""
    if setting == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {"name": reply.name, "schema": dict(reply.schema), "strict": True},
        }
    if setting == "json_object":
        return {"type": "json_object", "schema": _enumerate_probabilities(reply.schema)}
    return None


def refuses_structured_output(error: openai.APIStatusError) -> bool:
    """A server's 400/422/500 to a request with `response_format` that names the format (not, say, the
    temperature): the request is worth sending again without it. llama-cpp-python's server answers the
    json_schema type with a 500 (its request model's validation error, naming `response_format`)."""
    if error.status_code not in (400, 422, 500):
        return False
    text = f"{error} {error.body!r}".lower()
    return any(marker in text for marker in _REFUSAL_MARKERS)
