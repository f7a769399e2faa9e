"""One table model for the audit: a table is defined once (columns: header, cell format, alignment) and
rendered to markdown, CSV, the HTML pages and the terminal (through `launch.display.Display`).

Reads computed audit rows; writes strings (and, in `show`, calls the display it is given; it never prints).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, Generic, TypeVar

from markupsafe import escape as markup_escape

from mle_world.audit.stats import Interval, MeanSem
from mle_world.escapes import csv_cell, markdown_text, printable
from mle_world.launch.display import Display

R = TypeVar("R")


@dataclass(frozen=True)
class Column(Generic[R]):
    """One column: its header, how a row becomes the cell's text, and how the cell sits."""

    header: str
    cell: Callable[[R], str]
    left: bool = False
    """Left-aligned (names); numbers are right-aligned."""
    nowrap: bool = False
    """Kept on one line on the HTML page (ids)."""
    tone: Callable[[R], str] | None = None
    """The cell's tone on the HTML page ('pos', 'neg' or ''), e.g. a difference coloured by its sign."""


@dataclass(frozen=True)
class Table:
    """A titled table of text cells, ready for every renderer."""

    name: str
    """Short name; the HTML table's id is `<name>-table`."""
    title: str
    """Shown above the table on the terminal (markdown and HTML give their own section headings)."""
    columns: tuple[Column[object], ...]
    rows: tuple[tuple[str, ...], ...]
    links: tuple[str | None, ...] = ()
    """Per row, where its first cell links to on the HTML page (none when empty)."""
    tones: tuple[tuple[str, ...], ...] = ()
    """Per row and column, the HTML tone of the cell (none when empty)."""

    @property
    def headers(self) -> list[str]:
        return [c.header for c in self.columns]

    @property
    def right(self) -> list[str]:
        """Headers of the right-aligned columns."""
        return [c.header for c in self.columns if not c.left]

    def link(self, row: int) -> str | None:
        return self.links[row] if row < len(self.links) else None

    def tone(self, row: int, column: int) -> str:
        return self.tones[row][column] if row < len(self.tones) else ""


def build(
    name: str,
    title: str,
    columns: Sequence[Column[R]],
    items: Iterable[R],
    links: Callable[[R], str | None] | None = None,
) -> Table:
    """The table of `items`, one row each, cells formatted by `columns`."""
    items = list(items)
    rows = tuple(tuple(c.cell(item) for c in columns) for item in items)
    hrefs = tuple(links(item) for item in items) if links is not None else ()
    tones: tuple[tuple[str, ...], ...] = ()
    if any(c.tone is not None for c in columns):
        tones = tuple(tuple(c.tone(item) if c.tone is not None else "" for c in columns) for item in items)
    return Table(name, title, tuple(columns), rows, hrefs, tones)  # type: ignore[arg-type]


def filled(table: Table, keep: int = 0) -> Table:
    """`table` without its columns that are empty in every row (the first `keep` columns stay)."""
    cells_by_column = list(zip(*table.rows, strict=True)) or [() for _ in table.columns]
    shown = [j for j, cells in enumerate(cells_by_column) if j < keep or any(cells)]
    if len(shown) == len(table.columns):
        return table

    def pick(rows: tuple[tuple[str, ...], ...]) -> tuple[tuple[str, ...], ...]:
        if len(shown) == 1:
            return tuple((row[shown[0]],) for row in rows)
        return tuple(map(tuple, map(itemgetter(*shown), rows))) if shown else tuple(() for _ in rows)

    columns = tuple(table.columns[j] for j in shown)
    return Table(table.name, table.title, columns, pick(table.rows), table.links, pick(table.tones))


# --------------------------------------------------------------------------- cell formats


def num(value: float | None, digits: int = 2) -> str:
    """Fixed digits; empty when unknown."""
    return "" if value is None else f"{value:.{digits}f}"


def mean_sem(value: MeanSem, digits: int = 2) -> str:
    """'mean ± SEM'; '–' when there is no value."""
    if value.mean is None:
        return "–"
    return f"{value.mean:.{digits}f} ± {(value.sem or 0.0):.{digits}f}"


def signed_mean_sem(value: MeanSem, digits: int = 1) -> str:
    """'+mean ± SEM' (sign always shown); '–' when there is no value."""
    if value.mean is None:
        return "–"
    return f"{value.mean:+.{digits}f} ± {(value.sem or 0.0):.{digits}f}"


def interval(value: Interval, digits: int = 1) -> str:
    """'[low, high]' with signs; '–' when there is no interval."""
    if value.low is None or value.high is None:
        return "–"
    return f"[{value.low:+.{digits}f}, {value.high:+.{digits}f}]"


def p_value(value: float | None) -> str:
    """Three decimals, '<0.001' below that; empty when there is no test."""
    if value is None:
        return ""
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def csv_value(value: object) -> str:
    """A raw value as a summary.csv cell: unknown is empty, floats rounded to 6 digits."""
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(round(value, 6))
    return str(value)


# --------------------------------------------------------------------------- renderers


def markdown(table: Table) -> str:
    """A GitHub markdown table (no trailing newline); every cell is inert text (`markdown_text`)."""
    lines = ["| " + " | ".join(map(markdown_text, table.headers)) + " |", "|" + "---|" * len(table.columns)]
    lines += ["| " + " | ".join(map(markdown_text, row)) + " |" for row in table.rows]
    return "\n".join(lines)


def csv_text(table: Table) -> str:
    """CSV with a header line, '\\n' line ends, minimal quoting; every cell inert (`csv_cell`)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(table.headers)
    writer.writerows([csv_cell(cell) for cell in row] for row in table.rows)
    return buffer.getvalue()


def _escape(text: str) -> str:
    """HTML-escaped text (markupsafe's C escape), control and bidi characters shown as escapes."""
    return str(markup_escape(printable(text)))


def _escape_all(cells: Sequence[str]) -> list[str]:
    """Each cell HTML-escaped: all in one call of the C escape when a separator can be found that no cell
    holds (the trial table has tens of thousands of cells; one call each was most of its cost)."""
    joined = _SEPARATOR.join(cells)
    escaped = markup_escape(printable(joined))
    if len(escaped) == len(joined):
        # Both escapes only lengthen text: no cell changed (most columns of numbers and ids), so no split.
        return list(cells)
    if len(cells) > 1 and joined.count(_SEPARATOR) == len(cells) - 1:
        return str(escaped).split(_SEPARATOR)
    return [_escape(cell) for cell in cells]


_SEPARATOR = "\ue000"
"""Between cells escaped together: a private-use character both escapes leave alone (and _escape_all
checks no cell holds it)."""


def html(table: Table) -> str:
    """An HTML `<table id="<name>-table">`, every cell escaped; left-aligned cells have class 'l'."""
    if not table.tones:
        return html_columns(table.name, table.columns, list(zip(*table.rows, strict=True)), table.links)
    escape = _escape
    out = _html_head(table.name, table.columns)
    base = _classes(table.columns)
    width = len(table.columns)
    cells = _escape_all([cell for row in table.rows for cell in row])
    rows = list(zip(*[iter(cells)] * width, strict=True)) if width else []
    for r, href in enumerate(table.links):
        if href and width:
            rows[r] = (f'<a href="{escape(href)}">{rows[r][0]}</a>', *rows[r][1:])
    for r, row in enumerate(rows):
        tones = table.tones[r]
        tags = [f"{base[j]} {tones[j]}".strip() for j in range(width)]
        cols = "".join(
            f'<td class="{c}">{t}</td>' if c else f"<td>{t}</td>" for c, t in zip(tags, row, strict=True)
        )
        out.append(f"<tr>{cols}</tr>\n")
    out.append("</table>")
    return "".join(out)


def html_columns(
    name: str,
    columns: Sequence[Column[Any]],
    cells: Sequence[Sequence[str]],
    links: Sequence[str | None] = (),
) -> str:
    """`html` of a table without tones given column by column (`cells[j]`: column j's cells; no rows
    when empty): the trial table's tens of thousands of rows need no tuple each to be built, and
    each column is escaped in one call."""
    out = _html_head(name, columns)
    if columns and cells:
        if len(cells) != len(columns):
            raise ValueError(f"table {name}: {len(cells)} columns of cells for {len(columns)} columns")
        escaped = [_escape_all(column) for column in cells]
        first = escaped[0]
        for r, href in enumerate(links):
            if href:
                first[r] = f'<a href="{_escape(href)}">{first[r]}</a>'
        # Each row is `<tr>`, then per column its opening tag, cell and `</td>`, then `</tr>\n`. The
        # rows are laid out by slice assignment, a tag before each cell: no call per row (a format
        # call per row was a third of the trial table's cost).
        opening = [f'<td class="{classes}">' if classes else "<td>" for classes in _classes(columns)]
        before = ["</td></tr>\n<tr>" + opening[0], *("</td>" + tag for tag in opening[1:])]
        width, count = 2 * len(columns), len(first)
        laid: list[str] = [""] * (width * count)
        for j, column in enumerate(escaped):
            if len(column) != count:
                raise ValueError(f"table {name}: column {j} has {len(column)} cells, column 0 {count}")
            laid[2 * j :: width] = [before[j]] * count
            laid[2 * j + 1 :: width] = column
        if laid:
            laid[0] = "<tr>" + opening[0]
            out += laid
            out.append("</td></tr>\n")
    out.append("</table>")
    return "".join(out)


def _html_head(name: str, columns: Sequence[Column[Any]]) -> list[str]:
    """The table's opening tag and header row."""
    out = [f'<table id="{_escape(name)}-table"><tr>']
    out += [('<th class="l">' if c.left else "<th>") + _escape(c.header) + "</th>" for c in columns]
    out.append("</tr>\n")
    return out


def _classes(columns: Sequence[Column[Any]]) -> list[str]:
    """Each column's HTML classes: 'l' (left-aligned) and 'nowrap'."""
    return [" ".join(name for name, on in (("l", c.left), ("nowrap", c.nowrap)) if on) for c in columns]


def show(table: Table, display: Display) -> None:
    """The table on the display the caller chose (the CLI's is rich)."""
    display.table(table.title, table.headers, table.rows, right=table.right)


def sign_tone(value: float | None) -> str:
    """'pos' above zero, 'neg' below, '' otherwise."""
    if value is None or value == 0:
        return ""
    return "pos" if value > 0 else "neg"
