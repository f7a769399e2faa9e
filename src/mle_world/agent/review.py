"""Review of an executed node by the feedback model (`submit_review` tool call, JSON fallback).

Reads the node's code and output and whether its submission file exists; writes nothing itself.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from mle_world.agent.journal import Node, valid_metric
from mle_world.agent.llm.client import ChatModel, ReplySchema, ToolsUnsupported
from mle_world.agent.prompts import REVIEW_TOOL, REVIEW_TOOL_CHOICE, review_messages, strip_think
from mle_world.agent.world import PLAIN_TEXT, RATIONALE_CHARS, decode_json, parse_json_object

_PRINTED = re.compile(r"^\s*Validation metric:\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*$", re.M)
_FIELDS: dict[str, Any] = REVIEW_TOOL["function"]["parameters"]["properties"]


class ReviewReply(BaseModel):
    """The `submit_review` arguments as a model: the JSON fallback's schema for constrained decoding
    (the tool call's own schema is the tool's parameters). Fields, order and descriptions are the tool's."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    is_bug: bool = Field(description=_FIELDS["is_bug"]["description"])
    has_csv_submission: bool = Field(description=_FIELDS["has_csv_submission"]["description"])
    summary: str = Field(
        max_length=RATIONALE_CHARS, pattern=PLAIN_TEXT, description=_FIELDS["summary"]["description"]
    )
    metric: float | None = Field(description=_FIELDS["metric"]["description"])
    lower_is_better: bool = Field(description=_FIELDS["lower_is_better"]["description"])


REVIEW_SCHEMA = ReplySchema.of(ReviewReply)


@dataclass(frozen=True)
class Review:
    """The feedback model's verdict and AIDE's buggy-node decision derived from it."""

    is_buggy: bool
    summary: str
    metric: float | None
    lower_is_better: bool | None
    has_csv_submission: bool | None
    parsed: bool
    """False when neither a tool call nor a JSON object could be read (the node counts as buggy)."""
    reviewer_metric: float | None = None
    printed_metric: float | None = None
    mismatch: bool = False
    """The printed metric exists and the reviewer's is missing or differs beyond rounding."""


def printed_metric(output: str) -> float | None:
    """The value of the last `Validation metric: <value>` line the script printed, if any."""
    values = [valid_metric(float(m.group(1))) for m in _PRINTED.finditer(output)]
    return values[-1] if values else None


def _decimals(value: float) -> int:
    text = repr(value)
    if "e" in text or "E" in text or "." not in text:
        return 0 if "e" not in text.lower() else 12
    return len(text.split(".", 1)[1])


def metrics_agree(reviewer: float, printed: float) -> bool:
    """Equal up to the reviewer's rounding (it may report 0.8123 for 0.81234567) or 1e-4 relative."""
    tolerance = max(0.5 * 10.0 ** -min(_decimals(reviewer), 12), 1e-4 * abs(printed), 1e-12)
    return bool(abs(reviewer - printed) <= tolerance)


def buggy_verdict(
    node: Node, answer: dict[str, Any] | None, submission_exists: bool, printed: float | None = None
) -> Review:
    """AIDE's rules (the fork's): buggy if the reviewer says so, the run raised, the metric is not a
    number, the reviewer says there is no CSV, or the CSV is missing on disk. The metric is the one the
    script printed when it printed one (the reviewer's reading agrees with it up to its rounding, or is
    flagged as a mismatch), else the reviewer's. A reviewer that rounds 0.8123 and 0.8149 to 0.81 would
    otherwise tie the two nodes and keep the worse one as the best.
    """
    if answer is None:
        return Review(
            True, "The review could not be parsed.", None, None, None, False, printed_metric=printed
        )
    reviewer = valid_metric(answer.get("metric"))
    mismatch = printed is not None and (reviewer is None or not metrics_agree(reviewer, printed))
    metric = printed if printed is not None else reviewer
    is_bug = answer.get("is_bug")
    has_csv = answer.get("has_csv_submission")
    lower = answer.get("lower_is_better")
    buggy = (
        is_bug is not False
        or node.exc_type is not None
        or metric is None
        or has_csv is False
        or not submission_exists
    )
    summary = str(answer.get("summary") or "")
    if not submission_exists and not buggy_summary_mentions_submission(summary):
        summary = (summary + " " if summary else "") + "No ./submission/submission.csv was written."
    return Review(
        is_buggy=buggy,
        summary=summary,
        metric=None if buggy else metric,
        lower_is_better=lower if isinstance(lower, bool) else None,
        has_csv_submission=has_csv if isinstance(has_csv, bool) else None,
        parsed=True,
        reviewer_metric=reviewer,
        printed_metric=printed,
        mismatch=mismatch,
    )


def buggy_summary_mentions_submission(summary: str) -> bool:
    return "submission" in summary.lower()


class Reviewer:
    """Asks the feedback endpoint for a forced `submit_review` call.

    If the server rejects tools (400 mentioning tools/functions) the reviewer switches to the JSON
    fallback for the rest of the trial; a reply without the tool call is read as JSON too.
    """

    def __init__(
        self, model: ChatModel, task: str, *, obfuscate: bool = False, use_tools: bool = True
    ) -> None:
        self.model = model
        self.task = task
        self.obfuscate = obfuscate
        self._use_tools = use_tools
        self._lock = threading.Lock()

    def review(
        self,
        node: Node,
        submission_exists: bool,
        timeout_s: float | None = None,
        seed: int | None = None,
        printed: float | None = None,
    ) -> Review:
        answer: dict[str, Any] | None = None
        if self._use_tools:
            try:
                reply = self.model.chat(
                    review_messages(self.task, node, obfuscate=self.obfuscate, json_fallback=False),
                    purpose="review",
                    tools=[REVIEW_TOOL],
                    tool_choice=REVIEW_TOOL_CHOICE,
                    timeout_s=timeout_s,
                    seed=seed,
                )
                if reply.tool_arguments is not None:
                    answer = _loads(reply.tool_arguments)
                else:
                    answer = parse_json_object(strip_think(reply.content))
                if answer is not None:
                    return buggy_verdict(node, answer, submission_exists, printed)
            except ToolsUnsupported:
                with self._lock:
                    self._use_tools = False
        reply = self.model.chat(
            review_messages(self.task, node, obfuscate=self.obfuscate, json_fallback=True),
            purpose="review",
            timeout_s=timeout_s,
            seed=None if seed is None else seed + 1,
            reply_schema=REVIEW_SCHEMA,
        )
        answer = parse_json_object(strip_think(reply.content))
        return buggy_verdict(node, answer, submission_exists, printed)


def _loads(text: str) -> dict[str, Any] | None:
    value = decode_json(text)
    if value is None:
        return parse_json_object(text)
    return value if isinstance(value, dict) else None
