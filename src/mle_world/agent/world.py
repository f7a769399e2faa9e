"""World-model calls: pointwise predictions and pairwise comparisons, parsed and validated.

Reads the world endpoint's replies; writes nothing (`consult` completes the `records.Prediction`s,
which journal.json and events.jsonl keep).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mle_world.agent.journal import Node
from mle_world.agent.llm.client import ChatModel, ContextOverflow, ReplySchema, storable
from mle_world.agent.prompts import WorldContext, pairwise_messages, pointwise_messages, strip_think
from mle_world.records import Prediction

_FENCED_JSON = re.compile(r"```(?:json)?\s*\n(.*?)```", re.DOTALL)
RATIONALE_CHARS = 120
"""Longest rationale constrained decoding allows: the JSON must close within the role's max_tokens
(a grammar-bound reply cut at max_tokens is no JSON at all; the demo's world role has 160 tokens)."""
PLAIN_TEXT = rf"^[A-Za-z0-9 .,;:!?()'%+*/=_-]{{0,{RATIONALE_CHARS}}}$"
"""What a free-text field may hold under constrained decoding: no `<`, so no `<|im_end|>` (a chat
template's stop string, which the 270M demo model writes inside strings: the server stops there and the
JSON never closes), no quote, backslash or control character (llama.cpp's pattern grammar writes the
characters as they are, unescaped)."""


class PredictionReply(BaseModel):
    """The JSON object the pointwise prompt asks for, in its order; its schema is what constrained
    decoding sends. Replies are still read by `validate_prediction` (a server may ignore the schema)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    p_bug: float = Field(ge=0.0, le=1.0)
    """Probability that the run counts as buggy."""
    p_improves: float = Field(ge=0.0, le=1.0)
    """Probability that it runs and beats the best so far."""
    predicted_metric: float | None
    """The validation metric expected, or null."""
    confidence: float = Field(ge=0.0, le=1.0)
    rationale: str = Field(max_length=RATIONALE_CHARS, pattern=PLAIN_TEXT)


class ComparisonReply(BaseModel):
    """The JSON object the pairwise prompt asks for (read by `validate_comparison`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    better: Literal["A", "B"]
    confidence: float = Field(ge=0.0, le=1.0)
    rationale: str = Field(max_length=RATIONALE_CHARS, pattern=PLAIN_TEXT)


PREDICTION_SCHEMA = ReplySchema.of(PredictionReply)
COMPARISON_SCHEMA = ReplySchema.of(ComparisonReply)


@dataclass(frozen=True)
class Comparison:
    """The parsed reply to one pairwise question; `better` None when invalid.

    The journal keeps it as a `records.PairwiseMatch` (with the nodes' ids and whether it counted).
    """

    valid: bool
    better: Literal["A", "B"] | None = None
    confidence: float | None = None
    rationale: str | None = None
    error: str | None = None


def decode_json(text: str) -> Any:
    """A model's JSON text decoded, every string in it storable (`llm.storable`); None when it is no JSON.

    A reply is the model's to write: `"\\ud83d"` decodes to a lone surrogate, which the journal's UTF-8
    cannot hold (the step's checkpoint, and then the final one, failed: no result.json, on every retry
    of the trial), and brackets nested past the parser's recursion limit raise RecursionError.
    """
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return _storable_tree(value)


def _storable_tree(value: Any) -> Any:
    """Decoded JSON with each string (keys too) storable, walked with a stack (as deep as it nests)."""
    if isinstance(value, str):
        return storable(value)
    stack = [value] if isinstance(value, dict | list) else []
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            for index, item in enumerate(node):
                if isinstance(item, str):
                    node[index] = storable(item)
                elif isinstance(item, dict | list):
                    stack.append(item)
            continue
        for key, item in list(node.items()):
            if isinstance(item, str):
                item = node[key] = storable(item)
            elif isinstance(item, dict | list):
                stack.append(item)
            if storable(key) != key:  # keys are strings in decoded JSON
                del node[key]
                node[storable(key)] = item
    return value


def parse_json_object(text: str) -> dict[str, Any] | None:
    """The whole text, else a fenced block, else the last balanced {...}, else first '{' to last '}'."""
    candidates = [text.strip()]
    candidates.extend(m.group(1) for m in reversed(list(_FENCED_JSON.finditer(text))))
    candidates.extend(_balanced_objects(text))
    first, last = text.find("{"), text.rfind("}")
    if 0 <= first < last:
        candidates.append(text[first : last + 1])
    for candidate in candidates:
        value = decode_json(candidate)
        if isinstance(value, dict):
            return value
    return None


def _balanced_objects(text: str) -> list[str]:
    """Balanced top-level {...} spans, last first (models put the answer at the end)."""
    spans: list[str] = []
    depth = 0
    start = -1
    in_string = False
    escape = False
    for i, ch in enumerate(text):
        if in_string:
            if escape:
                escape = False
            elif ch == "\\":
                escape = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"' and depth > 0:
            in_string = True
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                spans.append(text[start : i + 1])
    return list(reversed(spans))


def _number(value: Any) -> float | None:
    """A finite number, also from a numeric string ("0.7", " 1e-3 "); None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip().rstrip("%")) / (100.0 if value.strip().endswith("%") else 1.0)
        except ValueError:
            return None
    if not isinstance(value, int | float) or not math.isfinite(float(value)):
        return None
    return float(value)


def _probability(data: dict[str, Any], key: str) -> float:
    value = _number(data.get(key))
    if value is None:
        raise ValueError(f"{key} is not a number: {data.get(key)!r}")
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{key} outside [0, 1]: {data.get(key)!r}")
    return value


def validate_prediction(data: dict[str, Any] | None) -> Prediction:
    """Numeric strings are coerced; a bad field is dropped (None, noted in `error`), not the prediction.

    The prediction is invalid only without a JSON object or without any usable probability.
    """
    if data is None:
        return Prediction(mode="pointwise", valid=False, error="no JSON object in the reply")
    fields: dict[str, float | None] = {}
    problems: list[str] = []
    for key in ("p_bug", "p_improves", "confidence"):
        try:
            fields[key] = _probability(data, key)
        except ValueError as problem:
            fields[key] = None
            problems.append(str(problem))
    metric = _number(data.get("predicted_metric"))
    if data.get("predicted_metric") is not None and metric is None:
        problems.append(f"predicted_metric is not a number: {data.get('predicted_metric')!r}")
    dropped = "; ".join(problems) or None
    if fields["p_bug"] is None and fields["p_improves"] is None:
        return Prediction(mode="pointwise", valid=False, error=dropped)
    rationale = data.get("rationale")
    return Prediction(
        mode="pointwise",
        valid=True,
        p_bug=fields["p_bug"],
        p_improves=fields["p_improves"],
        predicted_metric=metric,
        confidence=fields["confidence"],
        rationale=str(rationale) if rationale is not None else None,
        error=dropped,
    )


def validate_comparison(data: dict[str, Any] | None) -> Comparison:
    if data is None:
        return Comparison(valid=False, error="no JSON object in the reply")
    better = str(data.get("better", "")).strip().upper()
    if better not in ("A", "B"):
        return Comparison(valid=False, error=f"better is not A or B: {data.get('better')!r}")
    confidence: float | None = None
    error: str | None = None
    try:
        confidence = _probability(data, "confidence")
    except ValueError as problem:
        error = str(problem)  # dropped: without a confidence the match never counts
    rationale = data.get("rationale")
    return Comparison(
        valid=True,
        better="A" if better == "A" else "B",
        confidence=confidence,
        rationale=str(rationale) if rationale is not None else None,
        error=error,
    )


class WorldModel:
    """Pointwise and pairwise calls to the `world` endpoint; malformed output becomes an invalid
    result, never an exception. A prompt over the context window fails open too (an invalid result,
    DESIGN §4); other endpoint failures propagate (they are infra failures).
    """

    def __init__(self, model: ChatModel, temperature: float) -> None:
        self.model = model
        self.temperature = temperature

    def _ask(
        self,
        messages: list[dict[str, str]],
        purpose: str,
        timeout_s: float | None,
        seed: int | None,
        schema: ReplySchema,
    ) -> tuple[str, str | None]:
        """The reply's text without think blocks, and why it is invalid if it was cut at max_tokens."""
        reply = self.model.chat(
            messages,
            purpose=purpose,
            temperature=self.temperature,
            timeout_s=timeout_s,
            seed=seed,
            reply_schema=schema,
        )
        cut = None
        if reply.finish_reason == "length":
            cut = f"reply cut at max_tokens ({self.model.max_tokens}; finish_reason=length)"
        return strip_think(reply.content), cut

    def predict(
        self, ctx: WorldContext, candidate: Node, timeout_s: float | None = None, seed: int | None = None
    ) -> Prediction:
        try:
            text, cut = self._ask(
                pointwise_messages(ctx, candidate), "predict", timeout_s, seed, PREDICTION_SCHEMA
            )
        except ContextOverflow as error:
            return Prediction(mode="pointwise", valid=False, error=f"context length exceeded: {error}")
        prediction = validate_prediction(parse_json_object(text))
        if cut and not prediction.valid:
            return prediction.model_copy(update={"error": f"{cut}: {prediction.error}"})
        return prediction

    def compare(
        self, ctx: WorldContext, a: Node, b: Node, timeout_s: float | None = None, seed: int | None = None
    ) -> Comparison:
        try:
            text, cut = self._ask(pairwise_messages(ctx, a, b), "compare", timeout_s, seed, COMPARISON_SCHEMA)
        except ContextOverflow as error:
            return Comparison(valid=False, error=f"context length exceeded: {error}")
        comparison = validate_comparison(parse_json_object(text))
        if cut and not comparison.valid:
            return dataclasses.replace(comparison, error=f"{cut}: {comparison.error}")
        return comparison
