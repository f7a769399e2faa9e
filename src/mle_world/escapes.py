"""Untrusted text made inert for where it is shown: a terminal or a log read with cat/less/tail
(`printable`: control bytes shown as escapes) and a spreadsheet opening a CSV (`spreadsheet_cell`).

Reads and writes nothing; every place that puts untrusted text (trial causes, grader and server errors,
model replies, server-named model ids) on a terminal, in a log or in a CSV passes it through one of these.
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


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_cell(text: str) -> str:
    """`text` as a CSV cell a spreadsheet shows as text: one that starts like a formula (= + - @, or a tab
    or CR) gets a leading apostrophe, numbers stay as they are. A model id the server names (discovered
    from /models when the config names none) reached the cost CSVs as =HYPERLINK(...)."""
    if not text.startswith(_FORMULA_START):
        return text
    try:
        float(text)
    except ValueError:
        return "'" + text
    return text
