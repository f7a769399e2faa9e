"""The audit's table model: one definition rendered to markdown, CSV, HTML and a display, with the same cells.

Reads nothing; writes nothing (renders strings and a display's stream in memory).
"""

from __future__ import annotations

import io
import re

from markupsafe import escape

from mle_world.audit.stats import MeanSem
from mle_world.audit.tables import (
    Column,
    build,
    csv_text,
    filled,
    html,
    html_columns,
    markdown,
    mean_sem,
    show,
    sign_tone,
)
from mle_world.escapes import printable
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


def _one_cell_at_a_time(columns: list[Column[dict]], items: list[dict], hrefs: list[str | None]) -> str:
    """The HTML table as `html` made it before it was optimised: a row at a time, each cell escaped alone."""

    def escaped(text: str) -> str:
        return str(escape(printable(text)))

    heads = "".join(('<th class="l">' if c.left else "<th>") + escaped(c.header) + "</th>" for c in columns)
    lines = ['<table id="demo-table"><tr>' + heads + "</tr>\n"]
    for item, href in zip(items, hrefs, strict=True):
        cells = [escaped(c.cell(item)) for c in columns]
        if href:
            cells[0] = f'<a href="{escaped(href)}">{cells[0]}</a>'
        classes = [" ".join(n for n, on in (("l", c.left), ("nowrap", c.nowrap)) if on) for c in columns]
        tds = (
            f'<td class="{k}">{t}</td>' if k else f"<td>{t}</td>" for k, t in zip(classes, cells, strict=True)
        )
        lines.append("<tr>" + "".join(tds) + "</tr>\n")
    return "".join(lines) + "</table>"


def test_html_columns_is_html_of_the_same_cells_given_by_column() -> None:
    """The trial table is given column by column (no tuple per row) and `html` renders through the same
    code: both as a row at a time made it, links, markup, the escape separator and control characters
    included, and no row without cells."""
    columns = [Column[dict]("id", lambda r: r["name"], left=True, nowrap=True), *COLUMNS[:2], COLUMNS[3]]
    rows = [
        {"name": f"t{i}" + ("<&>'\"\ue000\x1b\u202e" if i % 3 == 0 else ""), "value": MeanSem(i, 0.5, 2)}
        for i in range(7)
    ]
    hrefs = [f"trials/t{i}.html?a=1&b=<2>" if i % 2 else None for i in range(7)]
    for items in (rows, rows[1:2], rows[3:4], []):
        links = [hrefs[rows.index(r)] for r in items]
        expected = _one_cell_at_a_time(columns, items, links)
        by_column = [[c.cell(r) for r in items] for c in columns]
        assert html_columns("demo", columns, by_column, links) == expected
        assert html(build("demo", "Demo", columns, items, links=lambda r: hrefs[rows.index(r)])) == expected
    assert html_columns("demo", columns, []) == _one_cell_at_a_time(columns, [], [])
    assert html_columns("demo", [], []) == '<table id="demo-table"><tr></tr>\n</table>'
