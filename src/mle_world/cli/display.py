"""The terminal display of the CLI: the launcher's news, progress bar and tables drawn with rich.

Implements `launch.display.Display` on a rich Console; writes to that console only.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from mle_world.escapes import printable, printable_line


class RichDisplay:
    """News as plain lines, a live progress bar over the trials, tables as rich tables."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._progress: Progress | None = None
        self._task: TaskID | None = None

    def say(self, text: str) -> None:
        # soft_wrap: a line naming a path or URL stays one line where output is no terminal (a log, a
        # pipe: rich would break it at 80 columns, mid-path); a terminal wraps it for the eye.
        # printable_line: news quotes trial causes and grader/server errors, which a hostile script or
        # reply can fill with escape sequences (OSC 52 clipboard writes, titles, lines rewritten) or
        # with a newline and a forged `[launch] ...` line below.
        self.console.print(printable_line(text), markup=False, highlight=False, soft_wrap=True)

    def start_progress(self, total: int) -> None:
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[extra]}"),
            TimeElapsedColumn(),
            console=self.console,
            transient=False,
        )
        self._task = self._progress.add_task("trials", total=total, extra="")
        self._progress.start()

    def update_progress(self, done: int, running: int, failed: int) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, completed=done, extra=f"running {running}, failed {failed}")

    def stop_progress(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def table(
        self, title: str, columns: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[str] = ()
    ) -> None:
        table = Table(title=Text(printable(title)), show_lines=False)
        for column in columns:
            table.add_column(column, justify="right" if column in right else "left")
        for row in rows:
            table.add_row(*(Text(printable_line(cell)) for cell in row))  # cells are data, never markup
        self.console.print(table)
