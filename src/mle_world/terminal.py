"""Text bound for a terminal or a log a person reads with cat/less/tail, made inert: control bytes shown.

Reads and writes nothing; every place that puts untrusted text (trial causes, grader and server errors,
model replies) on a terminal or in a log passes it through `printable` first.
"""

from __future__ import annotations

import re

_CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
"""C0 controls but tab and newline (ESC starts CSI/OSC sequences: OSC 52 writes the clipboard, OSC 0 the
title, OSC 8 links; CR overwrites a line), DEL, C1 controls (0x9b is an 8-bit CSI), the bidirectional
overrides and isolates that reorder what is shown, and lone surrogates (a UTF-8 stream cannot encode them:
printing one raised UnicodeEncodeError)."""


def _shown(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """`text` with each control character written as its escape (ESC → the four characters \\x1b)."""
    return text if _CONTROL.search(text) is None else _CONTROL.sub(_shown, text)


def printable_line(text: str) -> str:
    """`printable`, and a newline shown as \\n too: a one-line field cannot forge lines below it."""
    return printable(text).replace("\n", "\\n")
