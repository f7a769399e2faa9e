"""The replayed world model's replies: one line each in replies.jsonl, appended durably, read back on resume.

Reads and appends `<out>/replies.jsonl` (layout.ReplayFiles); every line is written with one `write` and
fsynced before its request counts as done, so a replay killed at any point (kill -9) resumes without
sending an answered request again. A torn last line (the kill hit the write) is cut off on open.
"""

from __future__ import annotations

import os
import threading
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from mle_world.errors import UserError
from mle_world.records import Prediction, Record
from mle_world.storage import read_text


class ReplayReply(Record):
    """One answered request of a replay (replies.jsonl line)."""

    request_id: str
    """sha256 of the request's content (replay/requests.py: `request_id`); a rerun skips it."""
    trial_id: str
    mode: Literal["pointwise", "pairwise"]
    node_id: str
    """Pointwise: the candidate; pairwise: the node shown as A."""
    other_id: str | None = None
    """Pairwise: the node shown as B."""
    model: str
    """The model id the request named."""
    ts: datetime
    prediction: Prediction | None = None
    """Pointwise: the reply as the agent's parser reads it (invalid when it is no usable JSON)."""
    better: Literal["A", "B"] | None = None
    """Pairwise: the answer (None when the reply was invalid)."""
    confidence: float | None = None
    valid: bool = True
    error: str | None = None
    rationale: str | None = None


class ReplyStore:
    """replies.jsonl: the done requests by id; `append` makes one more durable (thread-safe)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.replies: dict[str, ReplayReply] = {}
        self._lock = threading.Lock()
        self._load()

    def _load(self) -> None:
        if not self.path.exists():
            return
        try:
            text = read_text(self.path)
        except (OSError, UnicodeDecodeError) as error:
            raise UserError(f"{self.path}: cannot read the replies ({error})") from None
        whole, _, torn = text.rpartition("\n")
        if torn:
            # A kill during the last write: that request was never done; cut its bytes off so that the
            # next line starts on a line of its own.
            os.truncate(self.path, len((whole + "\n").encode()) if whole else 0)
        for number, line in enumerate(whole.splitlines(), 1):
            if not line.strip():
                continue
            try:
                reply = ReplayReply.model_validate_json(line)
            except ValidationError as error:
                first = error.errors()[0]
                raise UserError(
                    f"{self.path}: line {number} is no replay reply ({first['msg']}); move the file aside "
                    "to replay from scratch"
                ) from None
            self.replies[reply.request_id] = reply

    def __contains__(self, request_id: str) -> bool:
        return request_id in self.replies

    def append(self, reply: ReplayReply) -> None:
        """Write the reply's line and fsync it; only then is its request done."""
        data = (reply.model_dump_json() + "\n").encode()
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            self.replies[reply.request_id] = reply
