"""The context window of an endpoint: how many prompt characters fit, and how to measure a prompt.

Reads the endpoint's context length and max_tokens through the ChatModel; writes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from mle_world.agent.llm.client import ChatModel

CHARS_PER_TOKEN = 3.0
"""Conservative for code and English (tokenizers average 3.5-4): prompts stay under the window."""
RESERVE_TOKENS = 256
"""Chat template and special tokens not visible in the message text."""
SHRINK = (1.0, 0.5, 0.25, 0.0)
"""Share of the variable sections (Memory, ensemble code) kept on each try after a context 400."""


def prompt_chars(model: ChatModel) -> int | None:
    """Characters of prompt the endpoint accepts besides its completion, or None when unknown."""
    length = model.context_length()
    if length is None:
        return None
    return max(0, int((length - model.max_tokens - RESERVE_TOKENS) * CHARS_PER_TOKEN))


def size(messages: Sequence[dict[str, str]]) -> int:
    return sum(len(m.get("content") or "") for m in messages)
