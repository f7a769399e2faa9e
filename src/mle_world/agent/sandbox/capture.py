"""A script's output as the agent keeps it: the pipe drained whole with its first and last bytes kept
(the log), and AIDE's head-and-tail cut of that text for the prompts.

Reads a run's stdout pipe; writes nothing.
"""

from __future__ import annotations

from typing import IO

HEAD_CHARS = 2500
TAIL_CHARS = 2500


def truncate_output(text: str) -> str:
    """AIDE's rule: over 5100 characters keep the first 2500 and the last 2500."""
    if len(text) <= HEAD_CHARS + TAIL_CHARS + 100:
        return text
    return f"{text[:HEAD_CHARS]}\n ... [{len(text) - HEAD_CHARS - TAIL_CHARS} characters truncated] ... \n{text[-TAIL_CHARS:]}"


class BoundedCapture:
    """Drains a pipe completely, keeping its first and last `limit // 2` bytes and counting the rest."""

    def __init__(self, limit: int) -> None:
        self.half = max(limit // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > 2 * self.half:
                del self.tail[: len(self.tail) - self.half]

    def drain(self, stream: IO[bytes]) -> None:
        while chunk := stream.read(1 << 16):
            self.feed(chunk)

    def render(self) -> bytes:
        tail = bytes(self.tail[-self.half :]) if self.tail else b""
        dropped = self.total - len(self.head) - len(tail)
        if dropped <= 0:
            return bytes(self.head) + tail
        note = (
            f"\n[... {dropped} bytes of output dropped: the log keeps the first and last {self.half} ...]\n"
        )
        return bytes(self.head) + note.encode() + tail
