"""World-model calls: pointwise predictions and pairwise comparisons, parsed and validated.

Reads the world endpoint's replies; writes nothing (the loop records PredictionEvents).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from mle_world.agent.journal import Node
from mle_world.agent.llm import ChatModel
from mle_world.agent.prompts import WorldContext, pairwise_messages, pointwise_messages, strip_think

_FENCED_JSON = re.compile(r"```(?:json)?\s*\n(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class Prediction:
    """A pointwise prediction; `valid` False means missing/malformed output (the gate fails open)."""

    valid: bool
    p_bug: float | None = None
    p_improves: float | None = None
    predicted_metric: float | None = None
    confidence: float | None = None
    rationale: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class Comparison:
    """A pairwise comparison of two candidates; `better` None when invalid."""

    valid: bool
    better: Literal["A", "B"] | None = None
    confidence: float | None = None
    rationale: str | None = None
    error: str | None = None


def parse_json_object(text: str) -> dict[str, Any] | None:
    """The whole text, else a fenced block, else the last balanced {...}, else first '{' to last '}'."""
    candidates = [text.strip()]
    candidates.extend(m.group(1) for m in reversed(list(_FENCED_JSON.finditer(text))))
    candidates.extend(_balanced_objects(text))
    first, last = text.find("{"), text.rfind("}")
    if 0 <= first < last:
        candidates.append(text[first : last + 1])
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except (json.JSONDecodeError, ValueError):
            continue
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


def _probability(data: dict[str, Any], key: str) -> float:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{key} is not a number: {value!r}")
    if not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"{key} outside [0, 1]: {value!r}")
    return float(value)


def validate_prediction(data: dict[str, Any] | None) -> Prediction:
    if data is None:
        return Prediction(valid=False, error="no JSON object in the reply")
    try:
        p_bug = _probability(data, "p_bug")
        p_improves = _probability(data, "p_improves")
        confidence = _probability(data, "confidence")
        raw_metric = data.get("predicted_metric")
        if raw_metric is not None and (
            isinstance(raw_metric, bool) or not isinstance(raw_metric, int | float)
        ):
            raise ValueError(f"predicted_metric is not a number: {raw_metric!r}")
    except ValueError as error:
        return Prediction(valid=False, error=str(error))
    rationale = data.get("rationale")
    return Prediction(
        valid=True,
        p_bug=p_bug,
        p_improves=p_improves,
        predicted_metric=None if raw_metric is None else float(raw_metric),
        confidence=confidence,
        rationale=str(rationale) if rationale is not None else None,
    )


def validate_comparison(data: dict[str, Any] | None) -> Comparison:
    if data is None:
        return Comparison(valid=False, error="no JSON object in the reply")
    better = str(data.get("better", "")).strip().upper()
    if better not in ("A", "B"):
        return Comparison(valid=False, error=f"better is not A or B: {data.get('better')!r}")
    try:
        confidence = _probability(data, "confidence")
    except ValueError as error:
        return Comparison(valid=False, error=str(error))
    rationale = data.get("rationale")
    return Comparison(
        valid=True,
        better="A" if better == "A" else "B",
        confidence=confidence,
        rationale=str(rationale) if rationale is not None else None,
    )


class WorldModel:
    """Pointwise and pairwise calls to the `world` endpoint; malformed output becomes an invalid
    result, never an exception (endpoint failures do propagate: they are infra failures).
    """

    def __init__(self, model: ChatModel, temperature: float) -> None:
        self.model = model
        self.temperature = temperature

    def predict(self, ctx: WorldContext, candidate: Node, timeout_s: float | None = None) -> Prediction:
        reply = self.model.chat(
            pointwise_messages(ctx, candidate),
            purpose="predict",
            temperature=self.temperature,
            timeout_s=timeout_s,
        )
        return validate_prediction(parse_json_object(strip_think(reply.content)))

    def compare(self, ctx: WorldContext, a: Node, b: Node, timeout_s: float | None = None) -> Comparison:
        reply = self.model.chat(
            pairwise_messages(ctx, a, b),
            purpose="compare",
            temperature=self.temperature,
            timeout_s=timeout_s,
        )
        return validate_comparison(parse_json_object(strip_think(reply.content)))
