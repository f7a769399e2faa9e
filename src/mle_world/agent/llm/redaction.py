"""Redaction of the endpoint keys from everything the agent stores or sends (second line of defence).

Reads key values from the agent's environment by the names in the spec; writes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from mle_world.escapes import printable

MIN_SECRET_CHARS = 6
"""Shorter values (dummy keys such as "none" or "EMPTY") would redact ordinary words."""


class Redactor:
    """Replaces every known secret value with `[REDACTED:NAME]`."""

    def __init__(self, secrets: Mapping[str, str] | None = None) -> None:
        # Longest first, so a key containing another key is replaced whole.
        items = [(name, value) for name, value in (secrets or {}).items() if len(value) >= MIN_SECRET_CHARS]
        self._secrets = sorted(items, key=lambda item: -len(item[1]))

    @classmethod
    def from_environment(cls, names: Iterable[str | None], environ: Mapping[str, str]) -> Redactor:
        return cls({name: environ[name] for name in names if name and environ.get(name)})

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def text(self, value: str) -> str:
        for name, secret in self._secrets:
            if secret in value:
                value = value.replace(secret, f"[REDACTED:{name}]")
        return value

    def data(self, value: bytes) -> bytes:
        for name, secret in self._secrets:
            raw = secret.encode("utf-8", errors="surrogateescape")
            if raw in value:
                value = value.replace(raw, f"[REDACTED:{name}]".encode())
        return value


class RedactingFilter(logging.Filter):
    """A handler filter that redacts the formatted message (arguments included) before it is written."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        # printable: the node log and the job's stderr (a Slurm log) are read with cat/less/tail, and a
        # message can quote a server's error or a model's reply (escape sequences, lines rewritten).
        cleaned = printable(self.redactor.text(message))
        if cleaned != message:
            record.msg, record.args = cleaned, None
        if record.exc_info and record.exc_info[1] is not None:
            text = printable(self.redactor.text(logging.Formatter().formatException(record.exc_info)))
            record.exc_info, record.exc_text = None, text
        return True
