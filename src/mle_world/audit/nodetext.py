"""How a node's code and run output read on its trial page: the unified diff against its parent's code, each
diff line's class, and the output's tail.

Reads and writes nothing (journal nodes in, text out).
"""

from __future__ import annotations

import difflib

from mle_world.agent import Node

OUTPUT_TAIL_LINES = 60
"""Lines of a node's run output shown on the page (the journal already keeps only a tail)."""


def output_tail(text: str, lines: int = OUTPUT_TAIL_LINES) -> str:
    """The last `lines` lines of a run's output, after a line saying how many were left out."""
    parts = text.splitlines()
    if len(parts) <= lines:
        return text
    return "\n".join([f"… {len(parts) - lines} earlier lines not shown", *parts[-lines:]])


def diff_class(line: str) -> str:
    """A diff line's class on the page: a hunk header, an added or a removed line ('' for context)."""
    return "hunk" if line.startswith("@@") else "add" if line[:1] == "+" else "del" if line[:1] == "-" else ""


def code_diff(parent: Node | None, node: Node) -> str:
    """Unified diff of the node's code against its parent's ('' for a draft)."""
    if parent is None:
        return ""
    lines = difflib.unified_diff(
        parent.code.splitlines(), node.code.splitlines(), f"parent {parent.id[:8]}", f"node {node.id[:8]}",
        lineterm="", n=2,
    )  # fmt: skip
    return "\n".join(lines)
