"""The audit's table model: one definition rendered to markdown, CSV, HTML and a display, with the same cells.

Reads nothing; writes nothing (renders strings and a display's stream in memory).
"""

from __future__ import annotations

import io
import re

from mle_world.audit.stats import MeanSem
from mle_world.audit.tables import Column, build, csv_text, filled, html, markdown, mean_sem, show, sign_tone
from mle_world.launch.display import PlainDisplay

ROWS = [
    {"name": "a,b", "value": MeanSem(1.0, 0.5, 2), "delta": 2.0, "href": "trials/a.html"},
    {"name": "<script>", "value": MeanSem(None, None, 0), "delta": -1.0, "href": None},
]
COLUMNS: list[Column[dict]] = [
    Column("name", lambda r: r["name"], left=True),
    Column("mean ± SEM", lambda r: mean_sem(r["value"])),
    Column("Δ", lambda r: f"{r['delta']:+.1f}", tone=lambda r: sign_tone(r["delta"])),
    Column("empty", lambda r: ""),
]


def test_one_definition_gives_the_same_cells_everywhere() -> None:
    table = build("demo", "Demo", COLUMNS, ROWS, links=lambda r: r["href"])
    assert table.rows == (("a,b", "1.00 ± 0.50", "+2.0", ""), ("<script>", "–", "-1.0", ""))
    assert markdown(table) == "\n".join(
        [
            "| name | mean ± SEM | Δ | empty |",
            "|---|---|---|---|",
            "| a,b | 1.00 ± 0.50 | +2.0 |  |",
            "| &lt;script&gt; | – | -1.0 |  |",  # inert markdown: no tag reaches report.md
        ]
    )
    assert csv_text(table) == 'name,mean ± SEM,Δ,empty\n"a,b",1.00 ± 0.50,+2.0,\n<script>,–,-1.0,\n'
    page = html(table)
    assert page.startswith('<table id="demo-table"><tr><th class="l">name</th><th>mean ± SEM</th>')
    assert '<td class="l"><a href="trials/a.html">a,b</a></td>' in page
    assert '<td class="pos">+2.0</td>' in page and '<td class="neg">-1.0</td>' in page
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert re.findall(r"<td[^>]*>([^<]*)</td>", page)[-3:] == ["–", "-1.0", ""]
    stream = io.StringIO()
    show(table, PlainDisplay(stream))
    assert stream.getvalue().splitlines() == [
        "Demo",
        "name\tmean ± SEM\tΔ\tempty",
        "a,b\t1.00 ± 0.50\t+2.0\t",
        "<script>\t–\t-1.0\t",
    ]
    assert table.right == ["mean ± SEM", "Δ", "empty"]


def test_html_escapes_every_cell_and_filled_drops_empty_columns() -> None:
    """Cells are escaped together for speed; a cell holding the separator used for that (U+E000), markup or
    a control character still comes out as its own escaped text (the NUL shown as \\x00), and columns empty
    in every row can be dropped."""
    rows = [
        {"name": "a\ue000\x00<b>", "value": MeanSem(1.0, 0.5, 2), "delta": 0.0, "href": None},
        {"name": "x & 'y'", "value": MeanSem(None, None, 0), "delta": 1.0, "href": 'b".html'},
    ]
    plain = [c for c in COLUMNS if c.tone is None]
    for columns in (COLUMNS, plain):
        page = html(build("demo", "Demo", columns, rows, links=lambda r: r["href"]))
        cells = re.findall(r"<td[^>]*>(.*?)</td>", page)
        assert (
            cells[0] == "a\ue000\\x00&lt;b&gt;"
            and cells[len(columns)] == '<a href="b&#34;.html">x &amp; &#39;y&#39;</a>'
        )
        assert len(cells) == 2 * len(columns) and "<b>" not in page
    table = filled(build("demo", "Demo", COLUMNS, rows), keep=1)
    assert table.headers == ["name", "mean ± SEM", "Δ"] and table.rows[1] == ("x & 'y'", "–", "+1.0")
    assert table.tones == (("", "", ""), ("", "", "pos"))
    assert filled(build("demo", "Demo", COLUMNS, []), keep=1).headers == ["name"]
