"""Untrusted text made inert for where it is shown, one function per kind of output: a terminal or a log
read with cat/less/tail (`printable`), markdown (`markdown_text`) and a CSV cell (`csv_cell`).

Reads and writes nothing; every place that puts untrusted text (trial causes, grader and server errors,
model replies, server-named model ids) on a terminal, in a log, in report.md or in a CSV passes it
through one of these (HTML: `printable`, then jinja2's autoescape; stored JSON keeps the exact value). See
docs/threat-model.md, "Output escaping".
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


_MARKDOWN = str.maketrans(
    {
        **{c: "\\" + c for c in "\\`[]|@"},
        **{"<": "&lt;", ">": "&gt;", "&": "&amp;"},
    }
)
"""What makes text more than text in GitHub markdown: HTML tags (an <img> beacons out when the report is
opened), links and images ([..](..)), code spans, table cell ends, e-mail autolinks (@), and the backslash
that escapes them."""
_AUTOLINK = re.compile(r"(?i)(?<=[a-z0-9])(:)(?=//)|(?<![a-z0-9])(www)(\.)")
"""A bare URL or www. name is a link in GitHub markdown (its extended autolinks): the colon of `://` and
the dot of `www.` escaped, it stays text."""


def markdown_text(text: str) -> str:
    """`text` as inert markdown on one line: no tag, link, image, autolink, code span or table-cell break;
    control and bidi characters shown as escapes (report.md is also read with cat). Causes, errors and
    served model ids in the report are what hostile scripts and endpoints said."""
    escaped = printable_line(text).translate(_MARKDOWN)
    return _AUTOLINK.sub(lambda m: "\\:" if m.group(1) else m.group(2) + "\\.", escaped)


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


def csv_cell(text: str) -> str:
    """`text` as a CSV cell that is inert both in a spreadsheet and on a terminal (`cat costs/*.csv`):
    control and bidi characters and newlines shown as escapes (`printable_line`), then no formula
    (`spreadsheet_cell`). A server-named model id reached the cost CSVs' model column with its OSC 52
    clipboard escape intact."""
    return spreadsheet_cell(printable_line(text))
