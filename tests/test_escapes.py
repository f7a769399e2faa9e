"""escapes.py: one function per kind of output, each leaving untrusted text inert there; the terminal's
displays (rich and plain) applying it to news.

Reads and writes nothing. Markdown is rendered by markdown-it-py (CommonMark with raw HTML allowed, as
GitHub parses it) when installed; GitHub's bare-URL autolinks are checked by the escaped `://`.
"""

from __future__ import annotations

import csv
import io

import pytest
from fakeserver import HOSTILE_FORMULA_ID, HOSTILE_MODEL_ID
from rich.console import Console

from mle_world.audit.pages import environment
from mle_world.cli.display import RichDisplay
from mle_world.escapes import csv_cell, markdown_text
from mle_world.launch.display import PlainDisplay

RAW = ("\x1b", "\x07", "\u202e", "\n")


@pytest.mark.parametrize(
    "text", [HOSTILE_MODEL_ID, HOSTILE_FORMULA_ID, "see https://x.example/a, www.x.example, a@b.example"]
)
def test_markdown_text_renders_no_tag_link_or_control(text: str) -> None:
    shown = markdown_text(text)
    assert not [c for c in RAW if c in shown] and "<" not in shown and "://" not in shown.replace("\\://", "")
    markdown_it = pytest.importorskip("markdown_it")
    html = markdown_it.MarkdownIt("commonmark", {"html": True}).render(shown)
    assert "<img" not in html and "<a " not in html, html


def test_csv_cell_is_inert_and_stable_when_read_back_and_written_again() -> None:
    """costs/summary.csv is written from cells read back from costs/*.csv: a second pass changes nothing."""
    cells = [csv_cell(HOSTILE_FORMULA_ID), csv_cell(HOSTILE_MODEL_ID), csv_cell("-1.5"), csv_cell("a\r\nb")]
    assert cells[0].startswith("'=HYPERLINK(") and cells[2] == "-1.5"
    assert not [c for cell in cells for c in RAW if c in cell]
    buffer = io.StringIO()
    csv.writer(buffer).writerow(cells)
    [read_back] = csv.reader(io.StringIO(buffer.getvalue()))
    assert [csv_cell(cell) for cell in read_back] == cells


def test_html_pages_show_controls_escaped_after_autoescape() -> None:
    page = environment().from_string("<p>{{ model }}</p>").render(model=HOSTILE_MODEL_ID)
    assert page.startswith("<p>&lt;img src=http://127.0.0.1:9/x&gt;\\x1b]52;c;") and "\u202e" not in page


def test_news_is_one_line_on_either_display() -> None:
    """A cause quoted in news with a newline could forge a `[launch]` line below it."""
    cause = "failed: " + HOSTILE_MODEL_ID + "\n[launch] 1 trials: succeeded 1"
    plain, rich = io.StringIO(), io.StringIO()
    PlainDisplay(plain).say(cause)
    RichDisplay(Console(file=rich, width=1000)).say(cause)
    for shown in (plain.getvalue(), rich.getvalue()):
        assert shown.count("\n") == 1 and shown.endswith("\\n[launch] 1 trials: succeeded 1\n"), shown
        assert not [c for c in RAW[:3] if c in shown], shown
