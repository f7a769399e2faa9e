"""How the launcher reports to a person: lines of news, progress over a sweep's trials, tables.

Engine modules (launch/*) call this interface and never import a terminal library; the CLI passes its
rich implementation (`cli/display.py`). `PlainDisplay` (stderr lines) and `SilentDisplay` are the defaults
for library callers and tests. Writes only to the stream it is given.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol, TextIO

from mle_world.escapes import printable_line


class Display(Protocol):
    """What the launcher and the endpoint checks show while they work."""

    def say(self, text: str) -> None:
        """One line of news (plain text, never markup)."""
        ...

    def start_progress(self, total: int) -> None:
        """A sweep of `total` trials starts running here."""
        ...

    def update_progress(self, done: int, running: int, failed: int) -> None: ...

    def stop_progress(self) -> None: ...

    def table(
        self, title: str, columns: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[str] = ()
    ) -> None:
        """A titled table of text cells; `right` names the columns to right-align."""
        ...


@dataclass
class PlainDisplay:
    """News as plain lines on a stream (stderr by default); no progress bar; one line per probe."""

    stream: TextIO = field(default_factory=lambda: sys.stderr)

    def say(self, text: str) -> None:
        print(printable_line(text), file=self.stream, flush=True)  # one line: see RichDisplay.say

    def start_progress(self, total: int) -> None:
        pass

    def update_progress(self, done: int, running: int, failed: int) -> None:
        pass

    def stop_progress(self) -> None:
        pass

    def table(
        self, title: str, columns: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[str] = ()
    ) -> None:
        self.say(title)
        for row in (columns, *rows):
            self.say("\t".join(printable_line(cell) for cell in row))


class SilentDisplay(PlainDisplay):
    """Shows nothing."""

    def say(self, text: str) -> None:
        pass


@contextmanager
def progress_bar(
    display: Display, total: int, shown: bool
) -> Iterator[Callable[[int, int, int], None] | None]:
    """`display`'s progress bar over `total` trials while the block runs (when `shown`); yields its update
    function (None when not shown) and stops the bar however the block ends."""
    if not shown:
        yield None
        return
    display.start_progress(total)
    try:
        yield display.update_progress
    finally:
        display.stop_progress()
