"""The audit's table model: one definition rendered to markdown, CSV, HTML and a display, with the same cells.

Reads nothing; writes nothing (renders strings and a display's stream in memory).
"""

from __future__ import annotations

import io
import re

from mle_world.audit.stats import MeanSem
from mle_world.audit.tables import Column, build, csv_text, html, markdown, mean_sem, show, sign_tone
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
            "| <script> | – | -1.0 |  |",
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
